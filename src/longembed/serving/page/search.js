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
    .map(([name, value]) => `${name}\u00a0=\u00a0${value}`).join(", ");
  const method = FUSION_NAMES[fusion.method] || fusion.method;
  return options ? `${method} (${options})` : String(method);
}

function strategyText(facts) {
  const systems = (facts.systems || []).map((s) => SYSTEM_NAMES[s] || s);
  return systems.length > 1 ? `${systems.join(" + ")}, fused by ${fusionText(facts.fusion)}` : systems.join("");
}

// how the index embeds a document: its chunks (size, overlap, late or naive) or one vector per document
function vectorsText(facts) {
  const vectors = facts.vectors;
  const window = facts.max_length ? `up to ${facts.max_length} tokens (${facts.method})` : facts.method;
  if (!vectors) return window || "";
  if (vectors.granularity !== "chunks") return `one per document, ${window}`;
  const overlap = vectors.overlap ? `, ${vectors.overlap} shared with the next` : ", no overlap";
  const how = vectors.late
    ? `late chunking: pooled from the document read in windows of ${window}`
    : "naive chunking: each chunk embedded alone";
  return `chunks of ${vectors.size} ${vectors.unit}${overlap}; ${how}; a document scores its best chunk`;
}

function showFacts(facts) {
  const list = $("facts");
  list.replaceChildren();
  const when = facts.built_at ? new Date(facts.built_at) : null;
  const rows = [
    ["documents", facts.documents],
    ["chunks", facts.chunks],
    ["model", facts.model],
    ["vectors", vectorsText(facts)],
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

// Characters of context shown around the passage of every result but the first (all of it once opened).
const SHORT_CONTEXT = 110;

function resultItem(result, facts) {
  const item = el("li", "result");
  item.dataset.id = result.id;
  const head = el("div", "result-head");
  head.append(el("span", "rank", result.rank), result.file ? fileLink(result) : el("span", "doc-id", result.id));
  if (result.source && result.source !== result.id) head.append(el("span", "source", result.source));
  // where the passage is in the document: "page 12" of a PDF, "Install > Models" of a page with headings
  if (result.passage && result.passage.location) head.append(el("span", "location", result.passage.location));
  const fusedSystems = (facts.systems || []).length > 1;
  const score = el("span", "score", `${fusedSystems ? "fused" : "score"} ${number(result.score, 4)}`);
  score.title = fusedSystems ? `fused score (${fusionText(facts.fusion)})` : "score";
  head.append(score);
  item.append(head, systemsLine(result));
  if (result.rank === 1) {
    item.append(passageBlock(result.passage, false));
    return item;
  }
  // below the first result: a short context, the passage's first lines, and a button that shows it all
  const short = passageBlock(result.passage, true);
  const full = passageBlock(result.passage, false);
  full.hidden = true;
  const toggle = el("button", "quiet more", "show the whole passage");
  toggle.type = "button";
  toggle.addEventListener("click", () => {
    const opening = full.hidden;
    full.hidden = !opening;
    short.hidden = opening;
    toggle.textContent = opening ? "show less" : "show the whole passage";
  });
  item.append(short, full, toggle);
  return item;
}

// A PDF hit's id links its file (served by /search/file/<id>) at the passage's page: "#page=12" opens
// it there in the browser's PDF viewer.
function fileLink(result) {
  const page = result.passage && result.passage.page;
  const link = el("a", "doc-id", result.id);
  link.href = result.file + (page ? `#page=${page}` : "");
  link.target = "_blank";
  link.rel = "noopener";
  link.title = page ? `open the PDF at page ${page}` : "open the PDF";
  link.addEventListener("click", (event) => openWithKey(event, link));
  return link;
}

// A server with an API key hands out files to the key only, and a link sends none: the file is fetched
// with the key and opened from memory (a blob: address), at the same page.
async function openWithKey(event, link) {
  if (!sessionStorage.getItem(KEY_STORE)) return; // no key: the link opens the file itself
  event.preventDefault();
  const tab = window.open("", "_blank"); // opened within the click, so that no popup blocker stops it
  const response = await fetch(link.pathname, { headers: requestHeaders(false) });
  if (!response.ok) {
    if (tab) tab.close();
    setStatus(await errorText(response), true);
    return;
  }
  const address = URL.createObjectURL(await response.blob()) + link.hash;
  if (tab) {
    tab.opener = null;
    tab.location.href = address;
  } else {
    location.href = address;
  }
}

function tail(text, n) {
  if (text.length <= n) return text;
  const cut = text.slice(text.length - n);
  const space = cut.indexOf(" ");
  return "…" + (space >= 0 && space < 30 ? cut.slice(space + 1) : cut);
}

function head(text, n) {
  if (text.length <= n) return text;
  const cut = text.slice(0, n);
  const space = cut.lastIndexOf(" ");
  return (space > n - 30 ? cut.slice(0, space) : cut) + "…";
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

// a line of a table: a Markdown row (| a | b |) or box-drawing characters (│ ┌ ─ ═ ...)
const TABLE_LINE = /^[ \t]*\|.*\|[ \t]*$|[\u2500-\u257f]/m;

function passageBlock(passage, short) {
  const block = el("div", short ? "passage short" : "passage");
  if (!passage) return block;
  const before = passage.before || "", after = passage.after || "";
  const text = el("p", "passage-text");
  if (short) {
    text.append(el("span", "context", tail(before, SHORT_CONTEXT)), el("mark", null, passage.text),
      el("span", "context", head(after, SHORT_CONTEXT)));
  } else {
    const clipped = passage.start > before.length;
    text.append(el("span", "context", (clipped ? "…" : "") + before), el("mark", null, passage.text),
      el("span", "context", after));
  }
  if (TABLE_LINE.test(before + passage.text + after)) text.classList.add("tabular");
  block.append(text);
  const where = passage.location ? `${passage.location} · ` : "";
  if (!short) block.append(el("span", "where", `${where}characters ${passage.start}–${passage.end} of the document`));
  return block;
}

document.addEventListener("DOMContentLoaded", () => {
  $("search-form").addEventListener("submit", search);
  $("key-form").addEventListener("submit", useKey);
  $("forget-key").addEventListener("click", forgetKey);
  loadIndex();
});
