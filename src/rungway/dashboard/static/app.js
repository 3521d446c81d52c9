// The dashboard's main loop: poll the admin API every two seconds, tick countdowns every one.

import { AdminClient, AdminError } from "./api.js";
import { renderChart } from "./chart.js";
import { el, isoTime, tickCountdowns } from "./format.js";
import { renderLadder } from "./ladder.js";
import { renderPools } from "./pools.js";
import { renderPlan, renderRequests } from "./requests.js";
import { renderSpend } from "./spend.js";

const POLL_MS = 2000;
const REQUEST_LIMIT = 200;
const TABLE_ROWS = 50;

const $ = (id) => document.getElementById(id);
const admin = new AdminClient(askKey);
// Server time minus this browser's time: countdowns follow the gateway's clock when it
// says what its clock reads.
let skew = 0;
const shown = new Map();

function serverNow() {
  return Date.now() / 1000 + skew;
}

function askKey(wasRefused) {
  const dialog = $("key-dialog");
  const input = $("key-input");
  const error = $("key-error");
  error.hidden = !wasRefused;
  error.textContent = wasRefused ? "That key was refused. Try again." : "";
  input.value = "";
  return new Promise((resolve) => {
    const submit = (event) => {
      event.preventDefault();
      if (!input.value) return;
      $("key-form").removeEventListener("submit", submit);
      dialog.close();
      $("forget-key").hidden = false;
      resolve(input.value);
    };
    $("key-form").addEventListener("submit", submit);
    // The dialog cannot be dismissed without a key: nothing on the page works without one.
    dialog.addEventListener("cancel", (event) => event.preventDefault(), { once: true });
    dialog.showModal();
    input.focus();
  });
}

// Redraw a part only when its data changed, so focus and scroll stay where they are.
function changed(part, data) {
  const text = JSON.stringify(data);
  if (shown.get(part) === text) return false;
  shown.set(part, text);
  return true;
}

async function poll() {
  const [connections, pools, spend, requests] = await Promise.allSettled([
    admin.get("/admin/connections"),
    admin.get("/admin/pools"),
    admin.get("/admin/spend?by=rung&period=month"),
    admin.get(`/admin/requests?limit=${REQUEST_LIMIT}`),
  ]);
  const problems = [];
  if (connections.status === "fulfilled") {
    if (typeof connections.value.now === "number") skew = connections.value.now - Date.now() / 1000;
    if (changed("ladder", connections.value.connections)) {
      renderLadder($("ladder"), connections.value.connections, serverNow());
    }
  } else problems.push(connections.reason);
  if (pools.status === "fulfilled") {
    if (changed("pools", pools.value.pools)) renderPools($("pools"), pools.value);
  } else problems.push(pools.reason);
  if (spend.status === "fulfilled") {
    if (changed("spend", spend.value)) {
      renderSpend($("spend-totals"), $("budgets"), $("spend-period"), spend.value);
    }
  } else problems.push(spend.reason);
  if (requests.status === "fulfilled") {
    const rows = requests.value.requests;
    if (changed("requests", rows)) {
      renderRequests($("requests").tBodies[0], $("requests-empty"), rows.slice(0, TABLE_ROWS), openPlan);
      renderChart($("chart"), rows);
    }
  } else problems.push(requests.reason);
  tickCountdowns(document, serverNow());
  const status = $("status");
  if (problems.length === 0) {
    status.textContent = `Live · updated ${isoTime(serverNow())}`;
    status.className = "status live";
  } else {
    const first = problems[0];
    const message = first instanceof AdminError ? first.message : "the gateway is not answering";
    status.textContent = `Not updating: ${message}`;
    status.className = "status error";
  }
}

async function openPlan(requestId) {
  const dialog = $("plan");
  const body = $("plan-body");
  $("plan-title").textContent = `Route plan of ${requestId}`;
  body.replaceChildren(el("p", {}, "Loading…"));
  if (!dialog.open) dialog.showModal();
  try {
    const answer = await admin.get(`/admin/requests/${encodeURIComponent(requestId)}`);
    renderPlan(body, answer.request ?? answer);
  } catch (error) {
    body.replaceChildren(el("p", { class: "error" }, `Could not read the plan: ${error.message}`));
  }
}

let timer = null;
let polling = false;

async function loop() {
  // One chain of polls at a time, however often the tab is shown again.
  if (polling) return;
  clearTimeout(timer);
  polling = true;
  // A hidden tab asks nothing of the gateway; it catches up the moment it is shown.
  if (!document.hidden) {
    try {
      await poll();
    } catch (error) {
      $("status").textContent = `Not updating: ${error.message}`;
      $("status").className = "status error";
    }
  }
  polling = false;
  timer = setTimeout(loop, POLL_MS);
}

$("forget-key").hidden = !admin.hasKey;
$("forget-key").addEventListener("click", () => {
  admin.forgetKey();
  $("forget-key").hidden = true;
  shown.clear();
});
document.addEventListener("visibilitychange", () => {
  if (!document.hidden) loop();
});
setInterval(() => tickCountdowns(document, serverNow()), 1000);
loop();
