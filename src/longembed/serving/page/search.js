// The search page of `longembed serve --index DIR`: asks POST /search and shows the answer.
// Everything is built with textContent (never innerHTML): a document's text is shown, never run.
"use strict";

const KEY_STORE = "longembed-api-key";
const SYSTEM_NAMES = { dense: "dense", bm25: "BM25" };

const $ = (id) => document.getElementById(id);

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function requestHeaders(json) {
  const headers = {};
  if (json) headers["Content-Type"] = "application/json";
  const key = sessionStorage.getItem(KEY_STORE);
  if (key) headers["Authorization"] = "Bearer " + key;
  return headers;
}

function setStatus(text, isError) {
  const status = $("status");
  status.textContent = text;
  status.classList.toggle("error", Boolean(isError));
}

async function errorText(response) {
  try {
    const body = await response.json();
    const message = body.error && (body.error.message || body.error);
    if (message) return `${response.status}: ${message}`;
  } catch (ignored) { /* not JSON */ }
  return `the server answered ${response.status} ${response.statusText}`;
}

function number(value, digits) {
  if (value === null || value === undefined) return "—";
  const x = Number(value);
  if (x !== 0 && Math.abs(x) < 0.01) return x.toPrecision(3);
  return x.toFixed(digits);
}

// ------------------------------------------------------------------ the API key
function askForKey(reason) {
  $("search-form").hidden = true;
  $("facts-panel").hidden = true;
  $("results").replaceChildren();
  setStatus("");
  $("key-reason").textContent = reason;
  $("key-form").hidden = false;
  $("api-key").focus();
}

function useKey(event) {
  event.preventDefault();
  const key = $("api-key").value.trim();
  if (!key) return;
  sessionStorage.setItem(KEY_STORE, key);
  $("api-key").value = "";
  $("key-form").hidden = true;
  loadIndex();
}

function forgetKey() {
  sessionStorage.removeItem(KEY_STORE);
  location.reload();
}

// ------------------------------------------------------------------ the index's facts
let indexFacts = null;

async function loadIndex() {
  let response;
  try {
    response = await fetch("/search/index", { headers: requestHeaders(false) });
  } catch (error) {
    setStatus(`The server does not answer (${error.message}).`, true);
    return;
  }
  if (response.status === 401) {
    const stored = sessionStorage.getItem(KEY_STORE);
    if (stored) sessionStorage.removeItem(KEY_STORE);
    askForKey(stored ? "The server refused that key: enter its API key." : "This server needs an API key.");
    return;
  }
  if (!response.ok) {
    setStatus(await errorText(response), true);
    return;
  }
  indexFacts = await response.json();
  showFacts(indexFacts);
  $("forget-key").hidden = !sessionStorage.getItem(KEY_STORE);
  $("search-form").hidden = false;
  const query = new URLSearchParams(location.search).get("q");
  if (query) {
    $("query").value = query;
    search();
  } else {
    setStatus(`Ask a question: the ${indexFacts.documents} documents are ranked by ${strategyText(indexFacts)}.`);
  }
  $("query").focus();
}

const FUSION_NAMES = { rrf: "reciprocal rank fusion", linear: "a linear mix of min-max-normalised scores" };

function fusionText(fusion) {
  if (!fusion) return "";
  const options = Object.entries(fusion).filter(([name]) => name !== "method")
    .map(([name, value]) => `${name} = ${value}`).join(", ");
  const method = FUSION_NAMES[fusion.method] || fusion.method;
  return options ? `${method} (${options})` : String(method);
}

function strategyText(facts) {
  const systems = (facts.systems || []).map((s) => SYSTEM_NAMES[s] || s);
  return systems.length > 1 ? `${systems.join(" + ")}, fused by ${fusionText(facts.fusion)}` : systems.join("");
}

function showFacts(facts) {
  const list = $("facts");
  list.replaceChildren();
  const when = facts.built_at ? new Date(facts.built_at) : null;
  const rows = [
    ["documents", facts.documents],
    ["chunks", facts.chunks],
    ["model", facts.model],
    ["method", facts.max_length ? `${facts.method}, up to ${facts.max_length} tokens` : facts.method],
    ["strategy", facts.strategy],
    ["systems", strategyText(facts)],
    ["built", when && !isNaN(when) ? `${facts.built_at} (${when.toLocaleString()})` : facts.built_at],
    ["longembed", facts.longembed_version],
  ];
  for (const [name, value] of rows) {
    if (value === undefined || value === null || value === "") continue;
    list.append(el("dt", null, name), el("dd", null, value));
  }
  $("legend").textContent = legendText(facts);
  $("facts-panel").hidden = false;
}

function legendText(facts) {
  const parts = ["The highlighted text is the document's best passage, shown in its context."];
  if ((facts.systems || []).length > 1) {
    parts.push(`Each system ranks the documents on its own (# rank, then its score: cosine for dense, ` +
      `BM25's score for BM25; — when it did not rank the document); the score on the right fuses them ` +
      `(${fusionText(facts.fusion)}).`);
  } else {
    parts.push("The score on the right is the system's own.");
  }
  parts.push("A document's dense score is its best chunk's.");
  return parts.join(" ");
}

// ------------------------------------------------------------------ searching
let searchCount = 0;

async function search(event) {
  if (event) event.preventDefault();
  const query = $("query").value;
  if (!query.trim()) return;
  const k = Number($("k").value);
  const mine = ++searchCount;
  setStatus("Searching…");
  const started = performance.now();
  let response;
  try {
    response = await fetch("/search", {
      method: "POST", headers: requestHeaders(true), body: JSON.stringify({ query, k }),
    });
  } catch (error) {
    setStatus(`The server does not answer (${error.message}).`, true);
    return;
  }
  if (mine !== searchCount) return; // a newer search was started meanwhile
  if (response.status === 401) {
    sessionStorage.removeItem(KEY_STORE);
    askForKey("The server refused the key: enter its API key.");
    return;
  }
  if (!response.ok) {
    setStatus(await errorText(response), true);
    return;
  }
  const answer = await response.json();
  const seconds = ((performance.now() - started) / 1000).toFixed(2);
  history.replaceState(null, "", "?q=" + encodeURIComponent(query));
  showResults(answer, seconds);
}

function showResults(answer, seconds) {
  const list = $("results");
  list.replaceChildren(...answer.results.map((result) => resultItem(result, answer.index)));
  const n = answer.results.length;
  setStatus(n ? `${n} of ${answer.index.documents} documents, best first (${seconds} s).`
    : "No document matches (the filters, if any, left none).");
}

function resultItem(result, facts) {
  const item = el("li", "result");
  item.dataset.id = result.id;
  const head = el("div", "result-head");
  head.append(el("span", "rank", result.rank), el("span", "doc-id", result.id));
  if (result.source && result.source !== result.id) head.append(el("span", "source", result.source));
  const fused = el("span", "score", number(result.score, 4));
  fused.title = (facts.systems || []).length > 1 ? `fused score (${fusionText(facts.fusion)})` : "score";
  head.append(fused);
  item.append(head, systemsLine(result), passageBlock(result.passage));
  return item;
}

function systemsLine(result) {
  const line = el("div", "systems");
  for (const [name, system] of Object.entries(result.systems || {})) {
    const chip = el("span", `chip chip-${name}`);
    chip.append(el("b", null, SYSTEM_NAMES[name] || name));
    chip.append(system.rank === null || system.rank === undefined
      ? el("span", "missing", " did not rank it")
      : el("span", null, ` #${system.rank} · ${number(system.score, name === "bm25" ? 2 : 3)}`));
    line.append(chip);
  }
  return line;
}

function passageBlock(passage) {
  const block = el("p", "passage");
  if (!passage) return block;
  const clipped = passage.start > (passage.before || "").length;
  block.append(el("span", "context", (clipped ? "…" : "") + (passage.before || "")));
  block.append(el("mark", null, passage.text));
  block.append(el("span", "context", passage.after || ""));
  const where = el("span", "where", ` characters ${passage.start}–${passage.end}`);
  block.append(where);
  return block;
}

document.addEventListener("DOMContentLoaded", () => {
  $("search-form").addEventListener("submit", search);
  $("key-form").addEventListener("submit", useKey);
  $("forget-key").addEventListener("click", forgetKey);
  loadIndex();
});
