// The ladder: five rungs side by side, each with the connections that serve a model on it.

import { RUNGS, clockTime, countdown, el, percent } from "./format.js";

const RUNG_NOTES = {
  subscription: "plans you already pay for",
  keyless: "local models, no key",
  free: "metered, zero list price",
  cheap: "metered, low price",
  premium: "metered, everything else",
};

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
  return el(
    "article",
    {
      class: "connection",
      "data-connection": connection.id,
      "data-breaker": connection.breaker,
      "data-cooling": String(cooling),
      "data-disabled": String(disabled),
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
      models.map((served) => el("li", {}, served.model, el("span", { class: "tier" }, `tier ${served.tier}`))),
    ),
    el("div", { class: "badges" }, badges),
    cooling
      ? el(
          "p",
          { class: "cooldown" },
          `Cooldown${connection.cooldown_reason ? ` (${connection.cooldown_reason})` : ""}: `,
          countdown(connection.cooldown_until, "ends in"),
        )
      : null,
    windows.length === 0
      ? el("p", { class: "empty" }, "no quota window reported")
      : el("ul", { class: "windows" }, windows.map((window) => el("li", {}, windowBar(window)))),
  );
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
  const checked = window.checked_at ? `read ${clockTime(window.checked_at)}` : "";
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
      window.resets_at ? countdown(window.resets_at, "resets in") : el("span", {}, "no reset time"),
      el("span", { class: "source", title: checked }, window.source ?? ""),
    ),
  );
}
