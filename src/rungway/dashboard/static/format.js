// How numbers, money, times and durations read on the page; and a small DOM builder.

export const RUNGS = ["subscription", "keyless", "free", "cheap", "premium"];

export function money(usd) {
  if (usd === null || usd === undefined) return "–";
  if (usd !== 0 && Math.abs(usd) < 0.01) return `$${usd.toFixed(4)}`;
  return `$${usd.toFixed(2)}`;
}

export function percent(value) {
  if (value === null || value === undefined) return "–";
  return `${value.toFixed(value < 10 && value !== 0 ? 1 : 0)}%`;
}

// Every date and time on the page in one form, ISO 8601 in UTC to the second
// (2026-12-03T14:05:00Z): the same for every reader, whatever their time zone.
export function isoTime(epochSeconds) {
  return new Date(Math.round(epochSeconds) * 1000).toISOString().replace(/\.\d{3}Z$/, "Z");
}

export function duration(seconds) {
  const total = Math.max(0, Math.round(seconds));
  const days = Math.floor(total / 86400);
  const hours = Math.floor((total % 86400) / 3600);
  const minutes = Math.floor((total % 3600) / 60);
  const secs = total % 60;
  const pad = (n) => String(n).padStart(2, "0");
  if (days > 0) return `${days}d ${hours}h ${pad(minutes)}m`;
  if (hours > 0) return `${hours}h ${pad(minutes)}m ${pad(secs)}s`;
  return `${minutes}m ${pad(secs)}s`;
}

export function milliseconds(ms) {
  if (ms === null || ms === undefined) return "–";
  return ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${Math.round(ms)} ms`;
}

// el("td", { class: "num" }, "text", child): text is always set as text, never as markup.
export function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === null || value === undefined || value === false) continue;
    node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// A countdown element; the page's one-second tick rewrites every one of them. It reads
// `before`, the time left, `after` until the instant, and `passed` from then on.
export function countdown(until, { before = "", after = "", passed }) {
  return el("span", {
    class: "countdown",
    "data-until": until,
    "data-before": before,
    "data-after": after,
    "data-passed-text": passed,
  });
}

export function tickCountdowns(root, nowSeconds) {
  for (const node of root.querySelectorAll(".countdown[data-until]")) {
    const left = Number(node.dataset.until) - nowSeconds;
    const over = left <= 0;
    const text = over ? node.dataset.passedText : `${node.dataset.before}${duration(left)}${node.dataset.after}`;
    if (node.textContent !== text) node.textContent = text;
    node.toggleAttribute("data-passed", over);
  }
}
