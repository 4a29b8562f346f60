// kova web view: renders the event stream of docs/web.md (schema version 1). No build step.
"use strict";
(function () {
  const VERSION = 1;
  const token = new URLSearchParams(location.hash.slice(1)).get("token") ||
    new URLSearchParams(location.search).get("token") || "";
  const $ = (id) => document.getElementById(id);
  const transcript = $("transcript"), statusEl = $("status"), form = $("chat"), prompt = $("prompt");
  const stopButton = $("stop"), telemetryToggle = $("show-telemetry");
  const turns = new Map();      // turn number -> {el, text node, thinking node}
  const tools = new Map();      // turn, path and call id -> card
  const nested = new Map();     // the call that ran an inner agent -> its box in that card
  const approvals = new Map();  // approval id -> {card, timer}
  const sessionsButton = $("sessions-button"), newSession = $("new-session");
  const sessionsPanel = $("sessions"), sessionList = $("session-list");
  let socket = null, retry = 500, noticeTimer = null, chat = false, running = null;

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

  // One card per tool call: waiting for approval (with the buttons), running, then done or
  // failed. Its arguments are shown once, whichever of approval_requested and tool_started
  // comes first.
  // Call ids repeat between turns (a scripted model, a provider that numbers its calls):
  // a card is found by turn and id.
  function callKey(turn, id, path) {
    const where = path && path.length ? path.join("/") + "/" : "";
    return (turn === null || turn === undefined ? "-" : turn) + ":" + where + id;
  }
  // Where an event goes: the turn, or (an inner agent's event, with a path) a box inside the
  // card of the call that ran that agent, one level per id of the path.
  function scopeOf(e) {
    const turn = turnOf(e.turn);
    const path = e.path || [];
    if (!path.length) return turn;
    const key = "nested:" + callKey(e.turn, path[path.length - 1], path.slice(0, -1));
    let scope = nested.get(key);
    if (!scope) {
      const parent = scopeOf({ turn: e.turn, path: path.slice(0, -1) });
      const card = callCard(e.turn, parent.el, path[path.length - 1], "agent", null, path.slice(0, -1));
      const box = el("div", "nested");
      box.dataset.path = path.join("/");
      card.appendChild(box);
      scope = { el: box, text: null, thinking: null };
      nested.set(key, scope);
    }
    return scope;
  }
  function callCard(turn, turnEl, id, tool, args, path) {
    const key = callKey(turn, id, path);
    let card = tools.get(key);
    if (card) return card;
    card = el("div", "card tool");
    card.dataset.call = id;
    card.dataset.tool = tool;
    if (path && path.length) card.dataset.path = path.join("/");
    const title = el("div", "title");
    title.appendChild(el("span", "badge", "tool"));
    title.appendChild(el("span", "tool-name", tool));
    title.appendChild(el("span", "state state-running", "running"));
    card.appendChild(title);
    card.appendChild(el("pre", "arguments", pretty(args)));
    turnEl.appendChild(card);
    tools.set(key, card);
    return card;
  }
  function setState(card, text, cls) {
    const state = card.querySelector(".state");
    state.textContent = text;
    state.className = "state " + cls;
  }
  // A call's arguments as the model writes them: one line that fills in, replaced by the
  // call's card when the call starts.
  const writing = new Map();
  function toolArguments(e) {
    const scope = scopeOf(e);
    const key = callKey(e.turn, e.id, e.path || []);
    let line = writing.get(key);
    if (!line) {
      line = el("div", "meta arguments", "");
      writing.set(key, line);
      scope.el.appendChild(line);
    }
    line.textContent = e.tool + " " + e.text;
  }
  function toolStarted(e) {
    const line = writing.get(callKey(e.turn, e.id, e.path || []));
    if (line) { line.remove(); writing.delete(callKey(e.turn, e.id, e.path || [])); }
    const scope = scopeOf(e);
    scope.text = null; scope.thinking = null;  // text after a tool call starts a new block
    const card = callCard(e.turn, scope.el, e.id, e.tool, e.arguments, e.path);
    if (!card.classList.contains("waiting")) setState(card, "running", "state-running");
  }
  function toolFinished(e) {
    const card = callCard(e.turn, scopeOf(e).el, e.id, e.tool, null, e.path);
    card.classList.remove("waiting");
    setState(card, e.is_error ? "error" : "done", e.is_error ? "state-error" : "state-ok");
    card.appendChild(el("pre", "result", e.result));
  }
  function toolDeferred(e) {
    const card = callCard(e.turn, scopeOf(e).el, e.id, e.tool, null, e.path);
    setState(card, "waiting for a decision", "state-waiting");
  }
  function approvalRequested(e) {
    const host = e.turn !== null && e.turn !== undefined ? scopeOf(e) : null;
    if (host) { host.text = null; host.thinking = null; }
    const card = callCard(e.turn, host ? host.el : transcript, e.call_id || "approval:" + e.id,
      e.tool, e.arguments, e.path);
    card.classList.add("approval", "waiting");
    card.dataset.approval = e.id;
    if (e.call_id) card.dataset.callApproval = e.call_id;
    const name = card.querySelector(".tool-name");
    name.textContent = "Approve " + (e.annotations && e.annotations.title || e.tool) + "?";
    const title = card.querySelector(".title");
    badges(title, e.annotations);
    title.appendChild(title.querySelector(".state"));  // the state last, after the badges
    setState(card, "waiting for approval", "state-waiting");
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
    card.insertBefore(actions, card.querySelector(".arguments").nextSibling);
    // The server's deadline: what is left of it when this event was sent (a page that
    // reconnects is told the time left then, so a reload does not restart the clock).
    const seconds = typeof e.remaining_s === "number" ? e.remaining_s : e.timeout_s;
    const deadline = Date.now() + seconds * 1000;
    const tick = () => { left.textContent = Math.max(0, Math.round((deadline - Date.now()) / 1000)) + " s left"; };
    tick();
    approvals.set(e.id, { card: card, timer: setInterval(tick, 1000) });
  }
  function approvalDecided(e) {
    const entry = approvals.get(e.id);
    if (!entry) return;
    clearInterval(entry.timer);
    const card = entry.card;
    card.classList.remove("waiting");
    card.classList.add("decided");
    card.querySelectorAll("button, input").forEach((node) => { node.disabled = true; });
    const outcome = e.approved ? "approved" : "denied" + (e.reason ? ": " + e.reason : "");
    const where = e.by === "page" ? "" : " (" + e.by + ")";
    const countdown = card.querySelector(".countdown");
    countdown.textContent = outcome + where;
    countdown.className = "meta countdown " + (e.approved ? "state-ok" : "state-error");
    card.querySelector(".tool-name").textContent = card.dataset.tool;
    const state = card.querySelector(".state");
    if (state.classList.contains("state-waiting")) {
      if (e.approved) setState(card, "running", "state-running");
      else setState(card, "denied", "state-error");
    }
  }
  function turnRunning(number) {
    running = number;
    stopButton.hidden = !(chat && number !== null);
    stopButton.disabled = false;
  }

  const handlers = {
    hello(e) {
      clearTranscript();
      chat = !!e.chat; form.hidden = !e.chat; turnRunning(null);
      sessionsButton.hidden = newSession.hidden = !(e.chat && e.sessions);
      if (e.limits && e.limits.max_chat_chars) prompt.maxLength = e.limits.max_chat_chars;
      if (e.session) showSession(e.session);
      (e.replay || []).forEach(apply);
      transcript.scrollTop = transcript.scrollHeight;
    },
    turn_started(e) {
      turnRunning(e.turn);
      const turn = turnOf(e.turn);
      if (e.prompt !== null && e.prompt !== undefined) {
        const user = turn.el.appendChild(el("div", "user", e.prompt));
        (e.attachments || []).forEach((name) => { user.appendChild(el("span", "attachment", name)); });
      }
    },
    text(e) { appendText(scopeOf(e), e.text); },
    thinking(e) { appendThinking(scopeOf(e), e.text); },
    tool_arguments: toolArguments,
    tool_started: toolStarted,
    tool_finished: toolFinished,
    note(e) { scopeOf(e).el.appendChild(el("div", "meta note", e.text)); },
    tool_deferred: toolDeferred,
    approval_requested: approvalRequested,
    approval_decided: approvalDecided,
    turn_completed(e) {
      const u = e.usage || {};
      const parts = [u.input_tokens + " in / " + u.output_tokens + " out tokens",
        e.llm_calls + (e.llm_calls === 1 ? " model call" : " model calls"),
        e.duration_s.toFixed(2) + " s"];
      if (u.cost !== undefined) parts.push("$" + u.cost);
      if (e.first_delta_s !== null && e.first_delta_s !== undefined) parts.push("first text after " + e.first_delta_s.toFixed(2) + " s");
      turnOf(e.turn).el.appendChild(el("div", "meta done", parts.join(" · ")));
      if (running === e.turn) turnRunning(null);
    },
    turn_failed(e) {
      turnOf(e.turn).el.appendChild(el("div", "failed", e.error === "stopped" ? "turn stopped" : "turn failed: " + e.error));
      if (running === e.turn) turnRunning(null);
    },
    telemetry(e) {
      if (e.turn === null || e.turn === undefined) return;
      turnOf(e.turn).el.appendChild(el("div", "meta telemetry", e.summary));
    },
    error(e) { notice(e.message); },
    session(e) {
      clearTranscript(); turnRunning(null); sessionsPanel.hidden = true;
      showSession(e);
      transcript.scrollTop = transcript.scrollHeight;
    },
    sessions(e) {
      sessionList.textContent = "";
      if (!e.sessions.length) sessionList.appendChild(el("li", "meta", "no sessions yet"));
      e.sessions.forEach((s) => {
        const item = sessionList.appendChild(el("li"));
        const open = item.appendChild(el("button", "open-session", s.title || s.id));
        open.type = "button"; open.dataset.session = s.id;
        if (s.id === e.current) item.classList.add("current");
        item.appendChild(el("span", "meta", s.messages + (s.messages === 1 ? " message" : " messages") +
          (s.pending ? " · waits for approval" : "")));
        open.addEventListener("click", () => send({ type: "open", session: s.id }));
      });
      sessionsPanel.hidden = false;
    },
  };
  function clearTranscript() {
    transcript.textContent = ""; turns.clear(); tools.clear(); nested.clear();
    approvals.forEach((entry) => clearInterval(entry.timer)); approvals.clear();
  }
  function showSession(e) {
    const box = transcript.appendChild(el("section", "history"));
    box.dataset.session = e.id;
    box.appendChild(el("div", "meta session-title", "session: " + (e.title || e.id)));
    if (e.earlier) box.appendChild(el("div", "meta", e.earlier + " earlier messages not shown"));
    e.messages.forEach((m) => {
      if (m.text) box.appendChild(el("div", m.role === "user" ? "user" : "assistant-text", m.text));
    });
  }
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

  sessionsButton.addEventListener("click", () => {
    if (!sessionsPanel.hidden) { sessionsPanel.hidden = true; return; }
    send({ type: "sessions" });
  });
  newSession.addEventListener("click", () => send({ type: "open", session: null }));
  stopButton.addEventListener("click", () => {
    if (running === null) return;
    stopButton.disabled = true;
    send({ type: "stop", turn: running });
  });
  function showTelemetry(on) {
    document.body.classList.toggle("hide-telemetry", !on);
    telemetryToggle.checked = on;
    try { localStorage.setItem("kova.telemetry", on ? "shown" : "hidden"); } catch (err) { /* private mode */ }
  }
  let stored = null;
  try { stored = localStorage.getItem("kova.telemetry"); } catch (err) { /* private mode */ }
  showTelemetry(stored !== "hidden");
  telemetryToggle.addEventListener("change", () => showTelemetry(telemetryToggle.checked));

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
