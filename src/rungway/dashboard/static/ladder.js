// The ladder: five rungs side by side, each with the connections that serve a model on it.

import { RUNGS, countdown, el, isoTime, percent } from "./format.js";

const RUNG_NOTES = {
  subscription: "plans you already pay for",
  keyless: "local models, no key",
  free: "metered, zero list price",
  cheap: "metered, low price",
  premium: "metered, everything else",
};
// Only rungs that bill per token carry a price tier: on a plan or a local model the tier
// would read as a cost that is never charged.
const PRICED_RUNGS = new Set(["free", "cheap", "premium"]);

// A window is exhausted when the upstream refused on it or it is full.
export function windowState(window) {
  if (window.status === "rejected" || (window.used_percent ?? 0) >= 100) return "exhausted";
  if (window.used_percent === null || window.used_percent === undefined) return "unknown";
  if (window.status === "allowed_warning" || window.used_percent >= 80) return "warning";
  return "ok";
}

export function renderLadder(container, connections, nowSeconds) {
  const rungs = RUNGS.map((rung, index) => {
    const serving = connections
      .map((connection) => ({
        connection,
        models: connection.models.filter((served) => served.rung === rung),
      }))
      .filter(({ models }) => models.length > 0);
    return el(
      "section",
      { class: "rung", "data-rung": rung, "aria-labelledby": `rung-${rung}` },
      el(
        "h3",
        { id: `rung-${rung}` },
        el("span", { class: "rung-number" }, String(index)),
        ` ${rung}`,
      ),
      el("p", { class: "rung-note" }, RUNG_NOTES[rung]),
      serving.length === 0
        ? el("p", { class: "empty" }, "no connection")
        : el(
            "ul",
            { class: "connections" },
            serving.map(({ connection, models }) =>
              el("li", {}, connectionCard(connection, models, nowSeconds)),
            ),
          ),
    );
  });
  container.replaceChildren(...rungs);
}

function connectionCard(connection, models, nowSeconds) {
  const names = new Set(models.map((served) => served.model));
  const windows = connection.windows.filter((w) => w.model === null || names.has(w.model));
  const cooling = connection.cooldown_until !== null && connection.cooldown_until > nowSeconds;
  const disabled = connection.disabled === true || connection.enabled === false;
  const badges = [
    el("span", { class: `badge breaker-${connection.breaker}` }, `breaker ${connection.breaker.replace("_", "-")}`),
  ];
  if (cooling) badges.push(el("span", { class: "badge cooling" }, "cooling down"));
  if (disabled) badges.push(el("span", { class: "badge disabled" }, "disabled"));
  // A provider whose service is gone (consumer Code Assist): say so, and what replaced it.
  if (connection.retired) {
    const retired = connection.retired;
    badges.push(
      el("span", { class: "badge retired", title: retired.notice }, `retired ${retired.since}: use ${retired.successor}`),
    );
  }
  // Which clients the plan serves: its terms, or the operator's choice past them; and a
  // warning when a plan for one person serves several client keys.
  const terms = connection.terms;
  if (terms) {
    const label = terms.widened ? "any client (widened past its terms)" : terms.clients === "any" ? "any client" : `terms: ${terms.clients.join(", ")} only`;
    badges.push(el("span", { class: terms.widened ? "badge terms widened" : "badge terms", title: terms.note }, label));
    if (terms.client_key) badges.push(el("span", { class: "badge terms" }, `client key ${terms.client_key} only`));
    if (terms.warning) badges.push(el("span", { class: "badge terms shared", title: terms.warning }, "one person's plan, several client keys"));
  }
  // The account's own word that it bills past its quota (Copilot overage, Claude extra
  // usage, Codex credits), and whether its last answer was billed so.
  if (connection.overage_in_use === true) {
    badges.push(el("span", { class: "badge overage" }, "billing past its quota"));
  } else if (connection.overage_permitted === true) {
    badges.push(el("span", { class: "badge overage" }, "can bill past its quota"));
  }
  return el(
    "article",
    {
      class: "connection",
      "data-connection": connection.id,
      "data-breaker": connection.breaker,
      "data-cooling": String(cooling),
      "data-disabled": String(disabled),
      "data-overage": connection.overage_in_use === true ? "in-use" : String(connection.overage_permitted === true),
      "aria-label": `connection ${connection.id}`,
    },
    el("h4", {}, connection.id),
    el(
      "p",
      { class: "meta" },
      `${connection.provider} · ${connection.billing}`,
      connection.overage ? ` · overage ${connection.overage}` : "",
    ),
    el(
      "ul",
      { class: "models" },
      models.map((served) =>
        el(
          "li",
          {},
          served.model,
          PRICED_RUNGS.has(served.rung) ? el("span", { class: "tier" }, `tier ${served.tier}`) : null,
        ),
      ),
    ),
    el("div", { class: "badges" }, badges),
    cooling ? el("p", { class: "cooldown" }, cooldownSentence(connection)) : null,
    windows.length === 0
      ? el("p", { class: "empty" }, "no quota window reported")
      : el("ul", { class: "windows" }, windows.map((window) => el("li", {}, windowBar(window)))),
  );
}

// One sentence: "cooling down until 2026-12-03T14:05:00Z (rate_limited), 4m 10s left".
function cooldownSentence(connection) {
  const until = isoTime(connection.cooldown_until);
  return [
    "cooling down until ",
    el("time", { datetime: until }, until),
    connection.cooldown_reason ? ` (${connection.cooldown_reason})` : "",
    ", ",
    // Past the instant only until the next poll, which drops the cooldown.
    countdown(connection.cooldown_until, { after: " left", passed: "ending now" }),
  ];
}

function windowBar(window) {
  const state = windowState(window);
  const used = window.used_percent;
  const shown = used === null || used === undefined ? 0 : Math.min(100, Math.max(0, used));
  const label = window.model ? `${window.name} (${window.model})` : window.name;
  const bar = el("div", {
    class: "bar",
    role: "meter",
    "aria-label": `${label} window used`,
    "aria-valuemin": 0,
    "aria-valuemax": 100,
    "aria-valuenow": used ?? undefined,
    "aria-valuetext": used === null || used === undefined ? "unknown" : `${percent(used)} used, ${state}`,
  });
  bar.append(el("div", { class: "fill" }));
  bar.firstChild.style.width = `${shown}%`;
  const checked = window.checked_at ? `read ${isoTime(window.checked_at)}` : "";
  return el(
    "div",
    { class: "window", "data-window": window.name, "data-state": state },
    el(
      "div",
      { class: "window-head" },
      el("span", { class: "window-name" }, label),
      el("span", { class: "window-state" }, state === "ok" ? percent(used) : `${percent(used)} · ${state}`),
    ),
    bar,
    el(
      "div",
      { class: "window-foot" },
      // Past its reset the reading describes a window that is over; the gateway reads the
      // new one from the next answer it gets on this connection.
      window.resets_at
        ? el(
            "span",
            { title: `resets at ${isoTime(window.resets_at)}` },
            countdown(window.resets_at, { before: "resets in ", passed: "stale; refreshed on next use" }),
          )
        : el("span", {}, "no reset time"),
      el("span", { class: "source", title: checked }, window.source ?? ""),
    ),
  );
}
