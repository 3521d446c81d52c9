// Spend this period: the totals and savings, and each paid rung against its budget.

import { RUNGS, el, money, percent } from "./format.js";

export function renderSpend(totals, budgets, periodLabel, spend) {
  periodLabel.textContent = spend.period;
  const total = spend.total;
  const saved = total.savings_usd ?? 0;
  totals.replaceChildren(
    stat("Requests", String(total.requests)),
    stat("Billed (incremental)", money(total.cost_usd)),
    stat("At list price", money(total.list_cost_usd)),
    stat("Saved", money(saved), "saved"),
  );
  const spentByRung = new Map(spend.rows.map((row) => [row.group, row]));
  const rungs = [...spend.budgets.rungs].sort(
    (a, b) => RUNGS.indexOf(a.rung) - RUNGS.indexOf(b.rung),
  );
  if (rungs.length === 0) {
    budgets.replaceChildren(
      el("p", { class: "empty" }, "No rung budgets are configured (ladder.rung_budget_usd)."),
    );
    return;
  }
  budgets.replaceChildren(
    ...rungs.map((rung) => budgetBar(rung, spentByRung.get(rung.rung), spend.budgets.period)),
  );
}

function stat(label, value, kind) {
  return el("div", { class: `stat ${kind ?? ""}` }, el("dt", {}, label), el("dd", {}, value));
}

function budgetBar(rung, row, period) {
  const used = rung.used_percent;
  const state = used === null ? "disabled" : used >= 100 ? "exhausted" : used >= 80 ? "warning" : "ok";
  const bar = el("div", {
    class: "bar",
    role: "meter",
    "aria-label": `${rung.rung} budget used`,
    "aria-valuemin": 0,
    "aria-valuemax": 100,
    "aria-valuenow": used ?? undefined,
    "aria-valuetext": used === null ? "budget 0: rung disabled" : `${percent(used)} of budget`,
  });
  const fill = el("div", { class: "fill" });
  fill.style.width = `${Math.min(100, used ?? 0)}%`;
  bar.append(fill);
  const reserved = rung.reserved_usd > 0 ? ` (+${money(rung.reserved_usd)} held)` : "";
  return el(
    "div",
    { class: "budget", "data-rung": rung.rung, "data-state": state },
    el(
      "div",
      { class: "window-head" },
      el("span", { class: "window-name" }, rung.rung),
      el(
        "span",
        {},
        `${money(rung.spent_usd)}${reserved} of ${money(rung.budget_usd)} per ${period}`,
      ),
    ),
    bar,
    row ? el("p", { class: "meta" }, `${row.requests} requests · list price ${money(row.list_cost_usd)}`) : null,
  );
}
