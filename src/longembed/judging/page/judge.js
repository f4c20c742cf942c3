// The judging page (longembed judge): pool a question, grade each result 2/1/0 by click or key.
// Every text from the server is shown with textContent, never parsed as HTML.
"use strict";

const GRADES = [[2, "Relevant", "r"], [1, "Partly", "p"], [0, "Not relevant", "x"]];
const KEY_GRADES = { "2": 2, "r": 2, "1": 1, "p": 1, "0": 0, "x": 0 };
const CONTEXT = 160;  // characters of context shown on each side of a passage
// a strategy against the best, as advice.md says it (within the margin, worse by more, the data can't tell)
const VERDICTS = { best: "best", within: "within", worse: "worse", undecided: "can't tell" };

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

// Advise: advise runs on the server in the background; the page polls its state until it is done.
let polling = null;

async function advise() {
  $("advice").hidden = false;
  await saving;  // the clicks made so far are in the judgments advise reads
  try { showAdvice(await api("POST", "/judge/advice")); } catch (err) { adviceState(err.message, true); return; }
  pollAdvice();  // at least once: a start answers "running"
}

function pollAdvice() {
  clearTimeout(polling);
  polling = setTimeout(async () => {
    try {
      const data = await api("GET", "/judge/advice");
      showAdvice(data);
      if (stillWorking(data)) pollAdvice();
    } catch (err) { adviceState(err.message, true); pollAdvice(); }
  }, 700);
}

function stillWorking(data) {  // advise running, or its offer to pool more still being counted
  return data.state === "running" || Boolean(data.advice && data.advice.pool_back && data.advice.pool_back.pending);
}

function adviceState(text, error = false) {
  $("advice-state").textContent = text;
  $("advice-state").classList.toggle("error", error);
}

function showAdvice(data) {
  $("advice").dataset.state = data.state;
  $("advice-lines").textContent = data.state === "running" ? data.lines.join("\n") : "";
  $("advice-lines").hidden = data.state !== "running";
  $("advise").disabled = data.state === "running";
  const since = data.judged_since ? ` · ${data.judged_since} judgments made since: press Advise again to include them` : "";
  if (data.state === "running") adviceState(`Advising on ${data.judgments} judgments… (keep judging meanwhile)`);
  else if (data.state === "failed") adviceState(`advise failed: ${data.error}`, true);
  else if (data.state === "done") adviceState(`From ${data.judgments} judgments${since}`);
  $("advice-result").hidden = data.state !== "done" || !data.advice;
  if (data.state === "done" && data.advice) renderAdvice(data.advice);
}

function renderAdvice(a) {
  const choice = $("advice-choice");
  choice.replaceChildren(el("strong", "", `Use ${a.choice}`), `: ${a.reason.replace(/^Use \S+:?\s*/, "")}`);
  const body = $("advice-table").tBodies[0];
  body.replaceChildren();
  for (const s of a.strategies) {
    const row = el("tr", (s.choice ? "chosen" : "") + (s.low ? " low" : ""));
    const name = el("td", "name", s.name);
    name.title = s.description;
    const score = el("td", "num", s.score.toFixed(1));
    if (s.low_bound !== null) score.append(" ", el("span", "interval", `[${s.low_bound.toFixed(1)}, ${s.high_bound.toFixed(1)}]`));
    const judged = el("td", "num judged", s.judged_at_10 === null ? "–" : `${s.judged_at_10.toFixed(1)}%${s.low ? " ⚠" : ""}`);
    judged.title = s.judged_at_10 === null ? "not measured (a fitted rule)" : (s.pooled ? "pooled" : "not pooled");
    row.append(name, score, el("td", "verdict", VERDICTS[s.verdict] || s.verdict), judged);
    body.append(row);
  }
  $("advice-warning").textContent = a.warning;
  $("advice-warning").hidden = !a.warning;
  const offer = a.pool_back;
  $("advice-pool").hidden = !offer;
  $("pool-back").hidden = !offer || Boolean(offer.pending);
  $("pool-counting").hidden = !offer || !offer.pending;
  if (offer && offer.pending) {
    $("pool-counting").textContent = `Counting the unjudged results of ${offer.strategies.join(", ")}…`;
  } else if (offer) {
    $("pool-back").textContent = `Judge these ${offer.results} results to compare ${offer.strategies.join(", ")} fairly`;
  }
  $("advice-commands").textContent = `${a.commands.index}\n${a.commands.search}`;
}

async function poolBack() {
  $("pool-back").disabled = true;
  try {
    const data = await api("POST", "/judge/pool");
    $("advice-pool").hidden = true;
    showProgress(data.progress);
    status(`${data.added} results added to ${data.questions} questions`);
    next();
  } catch (err) { status(err.message, true); } finally { $("pool-back").disabled = false; }
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
  else if (key === "a") advise();
  else if (key === "Escape") $("advice").hidden = true;
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
  $("advise").addEventListener("click", () => advise());
  $("advice-close").addEventListener("click", () => { $("advice").hidden = true; });
  $("pool-back").addEventListener("click", () => poolBack());
  document.addEventListener("keydown", onKey);
  next();  // resume: the first question with results left, or the first queued one
  api("GET", "/judge/advice").then((data) => {  // an advice still running when the page was reloaded
    if (data.state !== "running") return;
    $("advice").hidden = false;
    showAdvice(data);
    if (stillWorking(data)) pollAdvice();
  }).catch(() => {});
});
