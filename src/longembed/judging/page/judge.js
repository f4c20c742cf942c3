// The judging page (longembed judge): pool a question, grade each result 2/1/0 by click or key.
// Every text from the server is shown with textContent, never parsed as HTML.
"use strict";

const GRADES = [[2, "Relevant", "r"], [1, "Partly", "p"], [0, "Not relevant", "x"]];
const KEY_GRADES = { "2": 2, "r": 2, "1": 1, "p": 1, "0": 0, "x": 0 };
const CONTEXT = 160;  // characters of context shown on each side of a passage

let question = null;  // the question shown: {query_id, text, left, next, results: [...]}
let current = 0;      // the result the keys act on
let saving = Promise.resolve();  // clicks are sent one after another, in the order made
let view = 0;  // which question request is the latest: an older answer arriving later is not shown

const $ = (id) => document.getElementById(id);

async function api(method, path, body) {
  const response = await fetch(path, {
    method, headers: body ? { "Content-Type": "application/json" } : {},
    body: body ? JSON.stringify(body) : undefined,
  });
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error((data.error && data.error.message) || `HTTP ${response.status}`);
  return data;
}

function status(text, error = false) {
  $("status").textContent = text;
  $("status").classList.toggle("error", error);
}

function showProgress(p) {
  const line = $("progress");
  line.replaceChildren();
  const parts = [[p.questions_done, ` of ${p.questions} questions judged`], [p.judgments, " judgments"],
                 [p.results_left, " results left"], [p.queued, " questions queued"]];
  parts.forEach(([n, label], i) => {
    if (i) line.append(" · ");
    const b = document.createElement("b");
    b.textContent = String(n);
    line.append(b, label);
  });
  line.append(` · pool: top ${p.depth} of ${p.strategies} strategies`);
}

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function passageNode(passage) {
  const p = el("p", "passage");
  const before = passage.before || "", after = passage.after || "";
  p.append(el("span", "context", (before.length > CONTEXT ? "…" : "") + before.slice(-CONTEXT)));
  p.append(el("mark", "", passage.text || ""));
  p.append(el("span", "context", after.slice(0, CONTEXT) + (after.length > CONTEXT ? "…" : "")));
  return p;
}

function render() {
  const list = $("results");
  list.replaceChildren();
  $("asked").hidden = !question;
  if (!question) return;
  $("asked").textContent = question.text;
  question.results.forEach((result, i) => {
    const item = el("li", "result" + (result.grade === null ? "" : ` g${result.grade}`));
    item.id = `result-${i}`;
    item.classList.toggle("current", i === current);
    item.addEventListener("click", () => { current = i; highlight(false); });
    const head = el("div", "result-head");
    head.append(el("span", "doc-id", result.doc_id));
    if (result.passage.location) head.append(el("span", "location", result.passage.location));
    item.append(head, passageNode(result.passage));
    const buttons = el("div", "grades");
    for (const [grade, label, key] of GRADES) {
      const button = el("button", `g${grade}`, label);
      button.append(el("span", "key", ` (${grade})`));
      button.type = "button";
      button.dataset.grade = String(grade);
      button.title = `${label}: key ${grade} or ${key}`;
      button.setAttribute("aria-pressed", String(result.grade === grade));
      button.addEventListener("click", (event) => { event.stopPropagation(); judge(i, grade); });
      buttons.append(button);
    }
    item.append(buttons);
    list.append(item);
  });
}

function highlight(scroll = true) {
  document.querySelectorAll(".result").forEach((node, i) => node.classList.toggle("current", i === current));
  const node = $(`result-${current}`);
  if (scroll && node) node.scrollIntoView({ block: "nearest" });
}

function show(data) {
  if (data.progress) showProgress(data.progress);
  question = data.question || null;
  if (question) {
    const start = question.results.findIndex((r) => r.grade === null);
    current = start < 0 ? 0 : start;
    status(question.results.length ? (question.left ? `${question.left} of ${question.results.length} results to judge`
      : "All results judged: n for the next question") : "No strategy found anything: n for the next question");
  }
  render();
  highlight();
}

function judge(i, grade) {
  if (!question || !question.results[i]) return;
  const asked = question.query_id, doc = question.results[i].doc_id, before = question.results[i].grade;
  question.results[i].grade = grade;  // shown at once; the server's answer confirms it (or undoes it)
  const after = question.results.findIndex((r, j) => j > i && r.grade === null);
  const first = question.results.findIndex((r) => r.grade === null);
  current = after >= 0 ? after : (first >= 0 ? first : i);
  render();
  highlight();
  document.body.dataset.pending = String(Number(document.body.dataset.pending || 0) + 1);
  saving = saving.then(async () => {
    try {
      const data = await api("POST", "/judge/judgments", { query_id: asked, doc_id: doc, grade });
      showProgress(data.progress);
      if (question && question.query_id === asked) {
        question.left = data.question.left;
        status(question.left ? `saved · ${question.left} of ${question.results.length} results to judge`
          : "saved · all results judged: n for the next question");
      }
    } catch (err) {
      status(`not saved: ${err.message}`, true);
      const shown = question && question.query_id === asked ? question.results.find((r) => r.doc_id === doc) : null;
      if (shown) { shown.grade = before; render(); highlight(false); }
    } finally {
      document.body.dataset.pending = String(Number(document.body.dataset.pending) - 1);  // tests wait for 0
    }
  });
}

async function ask(text) {
  const mine = ++view;
  status("Pooling every strategy's results…");
  try {
    const data = await api("POST", "/judge/questions", { text });
    if (mine === view) show(data);
  } catch (err) { if (mine === view) status(err.message, true); }
}

async function next() {
  const mine = ++view;
  await saving;
  try {
    const data = await api("POST", "/judge/next");
    if (mine !== view) return;
    if (data.done) {
      showProgress(data.progress);
      question = null;
      render();
      status("Every question is judged. Type a new question above.");
      $("question").focus();
    } else {
      show(data);
    }
  } catch (err) { if (mine === view) status(err.message, true); }
}

function onKey(event) {
  if (event.target instanceof HTMLInputElement) {
    if (event.key === "Escape") event.target.blur();
    return;
  }
  if (event.ctrlKey || event.metaKey || event.altKey) return;
  const key = event.key;
  if (key in KEY_GRADES) judge(current, KEY_GRADES[key]);
  else if ((key === "j" || key === "ArrowDown") && question) { current = Math.min(current + 1, question.results.length - 1); highlight(); }
  else if ((key === "k" || key === "ArrowUp") && question) { current = Math.max(current - 1, 0); highlight(); }
  else if (key === "n") next();
  else if (key === "/") $("question").focus();
  else return;
  event.preventDefault();
}

document.addEventListener("DOMContentLoaded", () => {
  $("ask-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const text = $("question").value.trim();
    if (text) { $("question").value = ""; $("question").blur(); ask(text); }
  });
  $("next").addEventListener("click", () => next());
  document.addEventListener("keydown", onKey);
  next();  // resume: the first question with results left, or the first queued one
});
