"""The judging page and its routes (``longembed judge``), a FastAPI app served on 127.0.0.1:

    GET  /                        the page (its files under /page/, from this package: no CDN)
    GET  /judge/progress          questions asked, fully judged, judgments made, results left, queued
    POST /judge/questions         {"text": "..."}: the question, pooled when new, as recorded when not
    GET  /judge/questions/{id}    a question asked before
    POST /judge/next              the next question with results left (or queued), or {"done": true}
    POST /judge/judgments         {"query_id", "doc_id", "grade": 0|1|2}: recorded durably before the answer
    POST /judge/advice            start ``advise`` on the judged task in the background (:mod:`.advising`)
    GET  /judge/advice            its state: progress lines, then the recommendation and strategy table
    POST /judge/pool              pool the strategies the advice found mostly unjudged into every question

Pooling searches with every strategy, so it runs in the thread pool; a judgment appends a line and
rewrites two small files under the log's lock.  A user error (an unknown question, a grade that is not
0, 1 or 2) is a 400 with ``{"error": {"message": ...}}``.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from longembed.errors import UserError
from longembed.judging.advising import AdviceJob
from longembed.judging.session import JudgingSession
from longembed.serving.search_route import PAGE_HEADERS

#: The page's files (``src/longembed/judging/page``) and their media types.
PAGE_FILES = {"judge.html": "text/html; charset=utf-8", "judge.css": "text/css; charset=utf-8",
              "judge.js": "text/javascript; charset=utf-8"}


def create_judging_app(session: JudgingSession, advice: AdviceJob | None = None) -> FastAPI:
    """The app that serves ``session``'s page and routes (module docstring); without ``advice`` the
    advice routes answer that this server does not advise."""
    app = FastAPI(title="longembed judge", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.session = session

    @app.exception_handler(UserError)
    async def user_error(_request: Request, exc: UserError) -> JSONResponse:
        return JSONResponse({"error": {"message": str(exc)}}, status_code=400)

    @app.get("/")
    async def page() -> Response:
        return page_file("judge.html")

    @app.get("/page/{name}")
    async def asset(name: str) -> Response:
        return page_file(name)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/judge/progress")
    async def progress() -> dict[str, Any]:
        return await run_in_threadpool(session.progress)

    @app.post("/judge/questions")
    async def ask(request: Request) -> dict[str, Any]:
        body = await json_body(request)
        text = body.get("text")
        if not isinstance(text, str) or not text.strip():
            raise UserError("give the question as a non-empty string: {\"text\": \"...\"}")
        question = await run_in_threadpool(session.ask, text)
        return {"question": question, "progress": await run_in_threadpool(session.progress)}

    @app.get("/judge/questions/{query_id}")
    async def question(query_id: str) -> dict[str, Any]:
        return {"question": await run_in_threadpool(session.question, query_id),
                "progress": await run_in_threadpool(session.progress)}

    @app.post("/judge/next")
    async def next_question() -> dict[str, Any]:
        following = await run_in_threadpool(session.next_question)
        return {"question": following, "done": following is None,
                "progress": await run_in_threadpool(session.progress)}

    @app.post("/judge/judgments")
    async def judge(request: Request) -> dict[str, Any]:
        body = await json_body(request)
        query_id, doc_id, grade = body.get("query_id"), body.get("doc_id"), body.get("grade")
        if not isinstance(query_id, str) or not isinstance(doc_id, str) or not isinstance(grade, int):
            raise UserError('give {"query_id": "...", "doc_id": "...", "grade": 0, 1 or 2}')
        return await run_in_threadpool(session.judge, query_id, doc_id, grade)

    @app.post("/judge/advice")
    async def start_advice() -> dict[str, Any]:
        return await run_in_threadpool(advising(advice).start)

    @app.get("/judge/advice")
    async def advice_state() -> dict[str, Any]:
        return await run_in_threadpool(advising(advice).state)

    @app.post("/judge/pool")
    async def pool_back() -> dict[str, Any]:
        return await run_in_threadpool(advising(advice).pool_back)

    return app


def advising(advice: AdviceJob | None) -> AdviceJob:
    if advice is None:
        raise UserError("this server does not advise (start it with longembed judge)")
    return advice


async def json_body(request: Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError as exc:
        raise UserError("the body must be a JSON object") from exc
    if not isinstance(body, dict):
        raise UserError("the body must be a JSON object")
    return body


def page_file(name: str) -> Response:
    """One of the page's files, with the search page's headers (this server only, nothing inline)."""
    if name not in PAGE_FILES:
        return JSONResponse({"error": {"message": f"no page file {name!r}"}}, status_code=404)
    content = resources.files("longembed.judging").joinpath("page", name).read_bytes()
    return Response(content, media_type=PAGE_FILES[name], headers=PAGE_HEADERS)
