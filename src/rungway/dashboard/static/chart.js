// Incremental cost next to list-price cost over time, as an inline SVG line chart.
//
// Both lines are cumulative over the recent requests, oldest first; the gap between them
// is what the plans and cheaper rungs saved.

import { el, isoTime, money } from "./format.js";

const SVG = "http://www.w3.org/2000/svg";
const WIDTH = 560;
const HEIGHT = 220;
const PAD = { left: 56, right: 12, top: 12, bottom: 28 };

function svg(tag, attributes = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, String(value));
  if (text !== undefined) node.textContent = text;
  return node;
}

export function costSeries(requests) {
  const ordered = [...requests].sort((a, b) => a.started_at - b.started_at);
  let billed = 0;
  let list = 0;
  return ordered.map((row) => {
    billed += row.cost_usd ?? 0;
    // A request without a list price adds what it was billed: nothing was saved on it.
    list += row.list_cost_usd ?? row.cost_usd ?? 0;
    return { at: row.started_at, billed, list };
  });
}

export function renderChart(figure, requests) {
  const points = costSeries(requests);
  if (points.length === 0) {
    figure.replaceChildren(el("p", { class: "empty" }, "No requests yet."));
    return;
  }
  const last = points[points.length - 1];
  // Both lines start from zero just before the first request, so even one request shows.
  const first = { at: points[0].at - Math.max(1, (last.at - points[0].at) / 50), billed: 0, list: 0 };
  points.unshift(first);
  const span = last.at - first.at;
  const top = Math.max(last.list, last.billed, 1e-6);
  const x = (at) => PAD.left + ((at - first.at) / span) * (WIDTH - PAD.left - PAD.right);
  const y = (usd) => HEIGHT - PAD.bottom - (usd / top) * (HEIGHT - PAD.top - PAD.bottom);
  // Steps, not slopes: a cumulative cost rises at each request and stays flat between them.
  const line = (key) =>
    points
      .map((p, i) =>
        i === 0
          ? `M${x(p.at).toFixed(1)},${y(p[key]).toFixed(1)}`
          : `H${x(p.at).toFixed(1)} V${y(p[key]).toFixed(1)}`,
      )
      .join(" ");
  const saved = last.list - last.billed;
  const summary =
    `Over ${points.length - 1} recent requests: ${money(last.billed)} billed, ` +
    `${money(last.list)} at list price, ${money(saved)} saved.`;
  const chart = svg("svg", {
    viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
    role: "img",
    "aria-label": summary,
    class: "cost-chart",
  });
  for (const fraction of [0, 0.5, 1]) {
    const level = y(top * fraction);
    chart.append(
      svg("line", { x1: PAD.left, x2: WIDTH - PAD.right, y1: level, y2: level, class: "grid" }),
      svg("text", { x: PAD.left - 6, y: level + 4, class: "axis", "text-anchor": "end" }, money(top * fraction)),
    );
  }
  chart.append(
    svg("text", { x: PAD.left, y: HEIGHT - 8, class: "axis" }, isoTime(first.at)),
    svg("text", { x: WIDTH - PAD.right, y: HEIGHT - 8, class: "axis", "text-anchor": "end" }, isoTime(last.at)),
    svg("path", { d: line("list"), class: "line list" }),
    svg("path", { d: line("billed"), class: "line billed" }),
  );
  figure.replaceChildren(
    chart,
    el(
      "figcaption",
      {},
      el("span", { class: "key list" }, "list price ", money(last.list)),
      el("span", { class: "key billed" }, "incremental ", money(last.billed)),
      el("span", { class: "saved" }, "saved (the gap) ", money(saved)),
    ),
  );
}
