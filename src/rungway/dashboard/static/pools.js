// The plans' accounts, grouped by pool: each account's windows and how fast they fill, when
// the window that binds it first runs out, the sessions pinned to it, and its cache hits.

import { countdown, el, isoTime, percent } from "./format.js";
import { windowState } from "./ladder.js";

const COLUMNS = ["Account", "Windows", "Burn rate", "Runs out", "Pinned sessions", "Cache hits"];
const NUMERIC = new Set(["Burn rate", "Pinned sessions", "Cache hits"]);

export function renderPools(container, body) {
  if (body.pools.length === 0) {
    container.replaceChildren(el("p", { class: "empty" }, "No plans: no connection is billed as a subscription."));
    return;
  }
  container.replaceChildren(...body.pools.map((pool, index) => poolTable(pool, index, body.pinning)));
}

function poolTable(pool, index, pinning) {
  const id = `pool-${index}`;
  const count = pool.accounts.length;
  return el(
    "section",
    { class: "pool", "data-pool": pool.pool, "aria-labelledby": id },
    el(
      "h3",
      { id },
      pool.pool,
      el("span", { class: "pool-note" }, ` · ${count} ${count === 1 ? "account" : "accounts"}`),
    ),
    el(
      "div",
      { class: "scroll" },
      el(
        "table",
        { class: "accounts" },
        el("caption", { class: "sr-only" }, `Accounts of the ${pool.pool} pool`),
        el("thead", {}, el("tr", {}, COLUMNS.map((name) => el("th", { scope: "col", class: NUMERIC.has(name) ? "num" : null }, name)))),
        el("tbody", {}, pool.accounts.map((account) => accountRow(account, pinning))),
      ),
    ),
  );
}

function accountRow(account, pinning) {
  const windows = account.windows;
  const badges = [];
  if (account.disabled) badges.push(el("span", { class: "badge disabled" }, "disabled"));
  if (account.cooldown_until !== null) badges.push(el("span", { class: "badge cooling" }, "cooling down"));
  return el(
    "tr",
    { "data-account": account.id, "data-outlook": account.binding?.outlook ?? "unknown" },
    el("th", { scope: "row" }, account.id, badges.length ? el("div", { class: "badges" }, badges) : null),
    el(
      "td",
      { class: "account-windows" },
      windows.length === 0 ? el("span", { class: "empty" }, "no quota window reported") : windows.map(windowLine),
    ),
    el("td", { class: "num" }, windows.map((window) => el("div", { class: "burn", "data-window": window.name }, burnText(window)))),
    el("td", { class: "runs-out" }, runsOut(account.binding)),
    el("td", { class: "num pinned" }, account.pinned_sessions === null ? (pinning ? "0" : "–") : String(account.pinned_sessions)),
    el("td", { class: "num cache" }, account.cache_hit_share === null ? "–" : percent(account.cache_hit_share * 100)),
  );
}

function label(window) {
  return window.model ? `${window.name} (${window.model})` : window.name;
}

function windowLine(window) {
  const state = window.status === "rejected" ? "exhausted" : windowState(window);
  return el(
    "div",
    { class: "account-window", "data-window": window.name, "data-state": state },
    el("span", { class: "window-name" }, label(window)),
    " ",
    el("span", { class: "window-state" }, state === "exhausted" ? "exhausted" : `${percent(window.used_percent)} used`),
    window.resets_at
      ? [" · ", countdown(window.resets_at, { before: "resets in ", passed: "stale; refreshed on next use" })]
      : null,
  );
}

function burnText(window) {
  const rate = window.burn_per_hour;
  return rate === null ? `${window.name}: –` : `${window.name}: ${rate.toFixed(1)}%/h`;
}

// "5h runs out at 2026-12-04T19:02:00Z, in 42m 10s"; "not before reset"; "5h exhausted".
function runsOut(binding) {
  if (binding === null) return el("span", { class: "empty" }, "unknown: fewer than two readings");
  const name = label({ name: binding.window, model: binding.model });
  const at = binding.at;
  switch (binding.outlook) {
    case "runs_out":
      return [
        `${name} runs out at `,
        el("time", { datetime: isoTime(at) }, isoTime(at)),
        ", ",
        countdown(at, { before: "in ", passed: "now" }),
      ];
    case "exhausted":
      return [`${name} exhausted`, at ? [" · ", countdown(at, { before: "resets in ", passed: "resetting now" })] : null];
    case "not_before_reset":
      return ["not before reset", at ? [` (${name} resets `, countdown(at, { before: "in ", passed: "now" }), ")"] : null];
    default:
      return el("span", { class: "empty" }, "unknown: fewer than two readings");
  }
}
