// Recent requests as a table, and one request's route plan with every skip reason.

import { el, isoTime, milliseconds, money } from "./format.js";

export function renderRequests(tbody, empty, requests, onOpen) {
  empty.hidden = requests.length > 0;
  tbody.replaceChildren(
    ...requests.map((row) => {
      const open = el(
        "button",
        {
          type: "button",
          class: "link",
          "aria-label": `Route plan of request ${row.request_id}`,
        },
        row.request_id,
      );
      open.addEventListener("click", () => onOpen(row.request_id));
      const served = row.connection_id
        ? `${row.connection_id} · ${row.upstream_model ?? row.resolved_model}`
        : "–";
      const tr = el(
        "tr",
        { "data-request": row.request_id, "data-connection": row.connection_id ?? "", class: `outcome-${row.outcome}` },
        el("td", {}, open),
        el("td", {}, el("time", { datetime: isoTime(row.started_at) }, isoTime(row.started_at))),
        el("td", {}, row.requested_model),
        el("td", {}, served),
        el("td", {}, row.rung ?? "–"),
        el("td", {}, el("span", { class: "outcome" }, row.outcome), ` ${row.status}`),
        el("td", { class: "num" }, milliseconds(row.latency_ms)),
        el("td", { class: "num" }, money(row.cost_usd)),
        el("td", { class: "num" }, money(row.list_cost_usd)),
      );
      // The whole row opens the plan for a pointer; the button is there for the keyboard.
      tr.addEventListener("click", (event) => {
        if (event.target !== open) onOpen(row.request_id);
      });
      return tr;
    }),
  );
}

export function renderPlan(body, row) {
  const plan = row.plan;
  const facts = el(
    "dl",
    { class: "facts" },
    fact("Request", row.request_id),
    fact("Started", isoTime(row.started_at)),
    fact("Asked for", row.requested_model),
    fact("Resolved", row.resolved_model),
    fact("Served by", row.connection_id ? `${row.connection_id} (${row.rung ?? "no rung"})` : "nobody"),
    fact("Outcome", `${row.outcome} ${row.status}`),
    fact("Latency", milliseconds(row.latency_ms)),
    fact("Cost", `${money(row.cost_usd)} (list price ${money(row.list_cost_usd)})`),
  );
  if (!plan) {
    body.replaceChildren(facts, el("p", { class: "empty" }, "This request has no route plan."));
    return;
  }
  const ladder = plan.ladder ? `ladder ${plan.ladder}` : "no ladder";
  const category = plan.category ? `, category ${plan.category}` : "";
  const candidates = el(
    "ol",
    { class: "candidates" },
    plan.candidates.map((candidate) => {
      const chosen = candidate.model === row.upstream_model || candidate.model === row.resolved_model;
      const served = chosen && candidate.connections.includes(row.connection_id);
      return el(
        "li",
        { class: served ? "served" : null },
        el("span", { class: "badge" }, candidate.rung),
        ` ${candidate.provider}/${candidate.model} via ${candidate.connections.join(", ")}`,
        served ? el("strong", {}, " (served)") : null,
      );
    }),
  );
  const skips =
    plan.skipped.length === 0
      ? el("p", { class: "empty" }, "Nothing was skipped.")
      : el(
          "table",
          { class: "skips" },
          el("caption", { class: "sr-only" }, "Everything left out of the plan, and why"),
          el(
            "thead",
            {},
            el(
              "tr",
              {},
              ["Reason", "Connection", "Model", "Rung", "Detail"].map((name) => el("th", { scope: "col" }, name)),
            ),
          ),
          el(
            "tbody",
            {},
            plan.skipped.map((skip) =>
              el(
                "tr",
                { "data-reason": skip.reason },
                el("td", {}, el("code", {}, skip.reason)),
                el("td", {}, skip.connection ?? "all"),
                el("td", {}, skip.model ?? "all"),
                el("td", {}, skip.rung ?? "–"),
                el("td", {}, skip.detail, skip.resets_at ? ` (resets ${isoTime(skip.resets_at)})` : ""),
              ),
            ),
          ),
        );
  const attempts = (row.attempts ?? []).map((attempt) =>
    el(
      "li",
      {},
      `${attempt.connection_id}: ${attempt.outcome}${attempt.status ? ` ${attempt.status}` : ""}`,
      ` in ${milliseconds(attempt.latency_ms)}`,
      attempt.detail ? ` (${attempt.detail})` : "",
    ),
  );
  const parts = [
    facts,
    el("h3", {}, `Candidates, in order (${ladder}${category})`),
    plan.candidates.length === 0 ? el("p", { class: "empty" }, "No candidate.") : candidates,
    el("h3", {}, `Skipped (${plan.skipped.length})`),
    skips,
  ];
  if (attempts.length > 0) {
    parts.push(el("h3", {}, "Attempts"), el("ol", { class: "attempts" }, attempts));
  }
  body.replaceChildren(...parts);
}

function fact(label, value) {
  return el("div", {}, el("dt", {}, label), el("dd", {}, value));
}
