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

export function clockTime(epochSeconds) {
  return new Date(epochSeconds * 1000).toLocaleTimeString([], { hour12: false });
}

export function dateTime(epochSeconds) {
  return new Date(epochSeconds * 1000).toLocaleString([], { hour12: false });
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

// A countdown element; the page's one-second tick rewrites every one of them.
export function countdown(resetsAt, prefix) {
  return el("span", { class: "countdown", "data-resets-at": resetsAt, "data-prefix": prefix });
}

export function tickCountdowns(root, nowSeconds) {
  for (const node of root.querySelectorAll("[data-resets-at]")) {
    const left = Number(node.dataset.resetsAt) - nowSeconds;
    const text = left > 0 ? `${node.dataset.prefix} ${duration(left)}` : `${node.dataset.prefix} now`;
    if (node.textContent !== text) node.textContent = text;
  }
}
