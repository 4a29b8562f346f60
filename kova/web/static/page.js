// kova web view: renders the event stream of docs/web.md (schema version 1). No build step.
"use strict";
(function () {
  const VERSION = 1;
  const token = new URLSearchParams(location.hash.slice(1)).get("token") ||
    new URLSearchParams(location.search).get("token") || "";
  const $ = (id) => document.getElementById(id);
  const transcript = $("transcript"), statusEl = $("status"), form = $("chat"), prompt = $("prompt");
  const turns = new Map();      // turn number -> {el, text node, thinking node}
  const tools = new Map();      // call id -> card
  const approvals = new Map();  // approval id -> {card, timer}
  let socket = null, retry = 500, noticeTimer = null;

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function pretty(value) {
    return typeof value === "string" ? value : JSON.stringify(value, null, 2);
  }
  function nearBottom() {
    return transcript.scrollHeight - transcript.scrollTop - transcript.clientHeight < 80;
  }
  function notice(message) {
    const box = $("notice");
    box.textContent = message; box.hidden = false;
    clearTimeout(noticeTimer); noticeTimer = setTimeout(() => { box.hidden = true; }, 4000);
  }
  function setStatus(online, text) {
    statusEl.textContent = text;
    statusEl.className = "status " + (online ? "online" : "offline");
  }
  function send(message) {
    if (socket && socket.readyState === WebSocket.OPEN) {
      socket.send(JSON.stringify(Object.assign({ v: VERSION }, message)));
    } else {
      notice("not connected");
    }
  }

  function turnOf(number) {
    let turn = turns.get(number);
    if (!turn) {
      const section = el("section", "turn");
      section.dataset.turn = String(number);
      transcript.appendChild(section);
      turn = { el: section, text: null, thinking: null };
      turns.set(number, turn);
    }
    return turn;
  }
  function appendText(turn, text) {
    if (!turn.text) {
      const block = el("div", "assistant-text");
      turn.text = document.createTextNode("");
      block.appendChild(turn.text);
      turn.el.appendChild(block);
    }
    turn.text.appendData(text);
  }
  function appendThinking(turn, text) {
    if (!turn.thinking) {
      const details = el("details", "thinking");
      details.appendChild(el("summary", null, "thinking"));
      const body = el("div");
      turn.thinking = document.createTextNode("");
      body.appendChild(turn.thinking);
      details.appendChild(body);
      turn.el.appendChild(details);
    }
    turn.thinking.appendData(text);
  }
  function badges(title, annotations) {
    if (!annotations) return;
    const add = (label, danger) => title.appendChild(el("span", "badge" + (danger ? " danger" : ""), label));
    if (annotations.read_only === true) add("read-only");
    else if (annotations.destructive !== false) add("may modify", true);
    if (annotations.idempotent === true) add("idempotent");
    if (annotations.open_world !== false) add("open world");
  }

  function toolStarted(e) {
    const turn = turnOf(e.turn);
    turn.text = null; turn.thinking = null;  // text after a tool call starts a new block
    const card = el("div", "card tool");
    card.dataset.call = e.id;
    const title = el("div", "title");
    title.appendChild(el("span", "badge", "tool"));
    title.appendChild(el("span", null, e.tool));
    const state = el("span", "state state-running", "running");
    title.appendChild(state);
    card.appendChild(title);
    card.appendChild(el("pre", "arguments", pretty(e.arguments)));
    // The approval handler may have asked before the call was announced: keep the call first.
    const asking = turn.el.querySelector('[data-call-approval="' + CSS.escape(e.id) + '"]');
    turn.el.insertBefore(card, asking);
    tools.set(e.id, card);
  }
  function toolFinished(e) {
    let card = tools.get(e.id);
    if (!card) { toolStarted(e); card = tools.get(e.id); }
    const state = card.querySelector(".state");
    state.textContent = e.is_error ? "error" : "done";
    state.className = "state " + (e.is_error ? "state-error" : "state-ok");
    card.appendChild(el("pre", "result", e.result));
  }
  function approvalRequested(e) {
    const host = e.turn !== null && e.turn !== undefined ? turnOf(e.turn).el : transcript;
    const card = el("div", "card approval");
    card.dataset.approval = e.id;
    if (e.call_id) card.dataset.callApproval = e.call_id;
    const title = el("div", "title");
    title.appendChild(el("span", null, "Approve " + (e.annotations && e.annotations.title || e.tool) + "?"));
    badges(title, e.annotations);
    card.appendChild(title);
    card.appendChild(el("pre", "arguments", pretty(e.arguments)));
    const actions = el("div", "actions");
    const reason = el("input");
    reason.placeholder = "reason (optional)"; reason.maxLength = 2000;
    const yes = el("button", "approve", "Approve"), no = el("button", "deny", "Deny");
    yes.type = no.type = "button";
    yes.addEventListener("click", () => send({ type: "decision", id: e.id, approve: true }));
    no.addEventListener("click", () => {
      const message = { type: "decision", id: e.id, approve: false };
      if (reason.value.trim()) message.reason = reason.value.trim();
      send(message);
    });
    const left = el("span", "meta countdown");
    actions.append(yes, no, reason, left);
    card.appendChild(actions);
    host.appendChild(card);
    const deadline = Date.now() + e.timeout_s * 1000;
    const tick = () => { left.textContent = Math.max(0, Math.round((deadline - Date.now()) / 1000)) + " s left"; };
    tick();
    approvals.set(e.id, { card: card, timer: setInterval(tick, 1000) });
  }
  function approvalDecided(e) {
    const entry = approvals.get(e.id);
    if (!entry) return;
    clearInterval(entry.timer);
    entry.card.classList.add("decided");
    entry.card.querySelectorAll("button, input").forEach((node) => { node.disabled = true; });
    const outcome = e.approved ? "approved" : "denied" + (e.reason ? ": " + e.reason : "");
    const where = e.by === "page" ? "" : " (" + e.by + ")";
    entry.card.querySelector(".countdown").textContent = outcome + where;
    entry.card.querySelector(".countdown").className = "meta countdown " + (e.approved ? "state-ok" : "state-error");
  }

  const handlers = {
    hello(e) {
      transcript.textContent = ""; turns.clear(); tools.clear();
      approvals.forEach((entry) => clearInterval(entry.timer)); approvals.clear();
      form.hidden = !e.chat;
      if (e.limits && e.limits.max_chat_chars) prompt.maxLength = e.limits.max_chat_chars;
      (e.replay || []).forEach(apply);
      transcript.scrollTop = transcript.scrollHeight;
    },
    turn_started(e) {
      const turn = turnOf(e.turn);
      if (e.prompt !== null && e.prompt !== undefined) turn.el.appendChild(el("div", "user", e.prompt));
    },
    text(e) { appendText(turnOf(e.turn), e.text); },
    thinking(e) { appendThinking(turnOf(e.turn), e.text); },
    tool_started: toolStarted,
    tool_finished: toolFinished,
    approval_requested: approvalRequested,
    approval_decided: approvalDecided,
    turn_completed(e) {
      const u = e.usage || {};
      const parts = [u.input_tokens + " in / " + u.output_tokens + " out tokens",
        e.llm_calls + (e.llm_calls === 1 ? " model call" : " model calls"),
        e.duration_s.toFixed(2) + " s"];
      if (e.first_delta_s !== null && e.first_delta_s !== undefined) parts.push("first text after " + e.first_delta_s.toFixed(2) + " s");
      turnOf(e.turn).el.appendChild(el("div", "meta done", parts.join(" · ")));
    },
    turn_failed(e) { turnOf(e.turn).el.appendChild(el("div", "failed", "turn failed: " + e.error)); },
    telemetry(e) {
      if (e.turn === null || e.turn === undefined) return;
      turnOf(e.turn).el.appendChild(el("div", "meta telemetry", e.summary));
    },
    error(e) { notice(e.message); },
  };
  function apply(e) {
    const handler = handlers[e.type];
    if (handler) handler(e);  // unknown event types are skipped: newer servers may add some
  }

  function connect() {
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    socket = new WebSocket(scheme + location.host + "/ws?token=" + encodeURIComponent(token));
    socket.onopen = () => { retry = 500; setStatus(true, "live"); };
    socket.onmessage = (message) => {
      let frame;
      try { frame = JSON.parse(message.data); } catch (err) { return; }
      if (!frame || frame.v !== VERSION || !Array.isArray(frame.events)) return;
      const stick = nearBottom();
      frame.events.forEach(apply);
      if (stick) transcript.scrollTop = transcript.scrollHeight;
    };
    socket.onclose = (event) => {
      setStatus(false, event.code === 1013 ? "catching up…" : "reconnecting…");
      setTimeout(connect, retry);
      retry = Math.min(retry * 2, 5000);
    };
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const text = prompt.value.trim();
    if (!text) return;
    send({ type: "chat", text: text });
    prompt.value = "";
  });
  prompt.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); form.requestSubmit(); }
  });
  if (!token) setStatus(false, "no token in the address");
  else connect();
})();
