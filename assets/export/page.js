// dshs export: renders the session embedded in #data. Every text from the log reaches the
// page through textContent or an attribute value, never as markup.
"use strict";
(function () {
  var root = document.documentElement;
  var blocked = 0;
  // Anything the page tries to load is refused by its policy; count it where a test can see.
  document.addEventListener("securitypolicyviolation", function () {
    blocked += 1;
    root.setAttribute("data-blocked", String(blocked));
  });

  var FOLD = 3000; // characters of a text shown before "show all"
  var log = document.getElementById("log");
  var D;
  try {
    D = JSON.parse(document.getElementById("data").textContent);
  } catch (e) {
    log.textContent = "The session data of this page cannot be read: " + e;
    throw e;
  }

  // A lone surrogate (a log may hold one) cannot be shown: it reads as U+FFFD, as a
  // browser would draw it, and the DOM stays well-formed for whatever serializes it.
  function wellFormed(s) {
    return s.replace(/[\uD800-\uDBFF][\uDC00-\uDFFF]|[\uD800-\uDFFF]/g, function (m) {
      return m.length === 2 ? m : "\uFFFD";
    });
  }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = wellFormed(String(text));
    return e;
  }
  function when(ms) {
    if (typeof ms !== "number" || !isFinite(ms)) return null;
    var d = new Date(ms);
    if (isNaN(d.getTime())) return null;
    var t = el("time", null, d.toLocaleString());
    t.setAttribute("datetime", d.toISOString());
    return t;
  }
  function num(n) {
    return typeof n === "number" ? n.toLocaleString("en-US") : "?";
  }
  function plural(n, one, many) {
    return num(n) + " " + (n === 1 ? one : many || one + "s");
  }
  function str(v) {
    return typeof v === "string" ? v : v === undefined ? "" : JSON.stringify(v);
  }

  // A text, folded past FOLD characters behind a button that shows the rest.
  function textBlock(text, cls) {
    var box = el("div", cls || "text");
    text = str(text);
    if (text.length <= FOLD) {
      box.textContent = wellFormed(text);
      return box;
    }
    box.textContent = wellFormed(text.slice(0, FOLD));
    var more = el("button", "more", "show all " + num(text.length) + " characters");
    more.type = "button";
    more.addEventListener("click", function () {
      box.textContent = wellFormed(text);
    });
    var wrap = el("div");
    wrap.appendChild(box);
    wrap.appendChild(more);
    return wrap;
  }
  // Collapsed content, built only when first opened (reasoning, arguments, prompts).
  function lazy(label, build, cls) {
    var d = el("details", cls);
    d.appendChild(el("summary", null, label));
    var built = false;
    d.addEventListener("toggle", function () {
      if (d.open && !built) {
        built = true;
        d.appendChild(build());
      }
    });
    return d;
  }
  function pretty(args) {
    if (typeof args !== "string") return JSON.stringify(args, null, 2);
    try {
      return JSON.stringify(JSON.parse(args), null, 2);
    } catch (e) {
      return args;
    }
  }

  // The call id a tool result answers (format 4: top level; formats 0-3: the one block).
  function resultCallId(m) {
    if (!m) return null;
    if (typeof m.toolCallId === "string") return m.toolCallId;
    var c = Array.isArray(m.content) ? m.content[0] : null;
    if (c && c.type === "tool-result" && typeof c.toolCallId === "string") return c.toolCallId;
    if (m.source && typeof m.source.callId === "string") return m.source.callId;
    return null;
  }
  function isErrorResult(m) {
    var c = Array.isArray(m.content) ? m.content[0] : null;
    return m.isError === true || (c && c.type === "tool-result" && c.isError === true);
  }

  function blocks(content, into, calls) {
    if (!Array.isArray(content)) {
      into.appendChild(el("pre", null, JSON.stringify(content)));
      return;
    }
    for (var i = 0; i < content.length; i++) {
      var b = content[i];
      var type = b && typeof b === "object" ? b.type : null;
      if (type === "text") {
        into.appendChild(textBlock(b.text));
      } else if (type === "reasoning") {
        into.appendChild(
          lazy("reasoning (" + num(str(b.text).length) + " characters)", textBlock.bind(null, b.text), "reasoning")
        );
      } else if (type === "tool-call") {
        var call = el("div", "call");
        var head = el("div");
        head.appendChild(el("span", "name", str(b.name)));
        call.appendChild(head);
        call.appendChild(
          lazy("arguments", (function (a) {
            return function () {
              return textBlock(pretty(a), "code");
            };
          })(b.arguments))
        );
        if (calls && typeof b.id === "string") calls.set(b.id, call);
        into.appendChild(call);
      } else if (type === "tool-result") {
        blocks(b.content, into, null);
      } else if (type === "image" || type === "file") {
        var a = b.attachment || {};
        var label = "[" + type + (a.mediaType ? " " + str(a.mediaType) : "") +
          (a.name || a.filename ? ": " + str(a.name || a.filename) : "") + "]";
        into.appendChild(el("div", "note", label));
      } else if (type === "tool-addition" || type === "tool-removal") {
        into.appendChild(el("div", "note", (type === "tool-addition" ? "+ tool " : "− tool ") + str(b.toolName)));
      } else {
        into.appendChild(textBlock(JSON.stringify(b), "code"));
      }
    }
  }

  // Findings by the seq they name.
  var findingsAt = new Map();
  (D.findings || []).forEach(function (f) {
    if (typeof f.seq !== "number") return;
    if (!findingsAt.has(f.seq)) findingsAt.set(f.seq, []);
    findingsAt.get(f.seq).push(f);
  });
  function findingLine(f) {
    var where = "line " + f.line + (typeof f.seq === "number" ? ", seq " + f.seq : "");
    return el("div", "finding " + f.severity, f.severity + " [" + f.code + "] " + where + ": " + f.message);
  }

  var nodes = D.nodes || [];
  var bySeq = new Map();
  var shown = 0;
  // The tree: the nodes on the surface, and under each replacement the nodes it replaced.
  // The DOM of a replaced history is built when it is first opened: most of a long
  // session's text is history, and the page must show the surface in seconds.
  var roots = [];
  var chain = []; // the replacements above the node being placed
  for (var i = 0; i < nodes.length; i++) {
    var n = nodes[i];
    while (chain.length > n.depth) chain.pop();
    n.parent = chain.length ? chain[chain.length - 1] : -1;
    if (n.parent < 0) roots.push(i);
    else (nodes[n.parent].kids = nodes[n.parent].kids || []).push(i);
    if (n.replaced > 0) chain.push(i);
    bySeq.set(n.seq, i);
    if (n.depth === 0 && n.m) shown += 1;
  }
  // The search in force, applied to nodes rendered later too.
  var searchKeep = null;
  var searchHit = null;

  // Tokens and cost as USAGE.md counts them; an unpriced part is said, never costed as 0.
  function tokenText(u) {
    var s = plural(u.calls, "model call") + ": " + num(u.totalTokens) + " tokens (input " + num(u.inputTokens) +
      ", cache read " + num(u.cacheReadTokens) + (u.cacheWriteTokens ? ", cache write " + num(u.cacheWriteTokens) : "") +
      ", output " + num(u.outputTokens) + ")";
    if (typeof u.costUSD === "number") s += " · $" + u.costUSD.toFixed(4);
    if (u.unpricedTokens) s += (typeof u.costUSD === "number" ? " + " : " · ") + num(u.unpricedTokens) + " unpriced tokens";
    if (u.callsWithoutUsage) s += " · " + plural(u.callsWithoutUsage, "call") + " without usage";
    return s;
  }
  var turnsByN = new Map();
  (D.turns || []).forEach(function (t) {
    turnsByN.set(t.n, t);
  });
  function turnHeader(n) {
    var t = turnsByN.get(n);
    var h = el("div", "turn");
    h.appendChild(el("b", null, "Turn " + n));
    if (t) {
      var w = when(t.start);
      if (w) h.appendChild(w);
      if (t.reason) h.appendChild(el("span", null, t.reason));
      if (t.usage) h.appendChild(el("span", "tokens", tokenText(t.usage)));
    }
    return h;
  }

  function renderNode(i, calls, into) {
    var n = nodes[i];
    var m = n.m;
    var role = m && typeof m.role === "string" ? m.role : n.type.split("/")[0];
    var summary = n.replaced > 0 && n.type === "user/message";
    var box = el("article", (m ? "msg " : "node ") + role.replace(/[^a-z]/g, "") + (summary ? " summary" : ""));
    box.id = "seq-" + n.seq;
    box.setAttribute("data-depth", String(n.depth));
    box.setAttribute("data-seq", String(n.seq));
    var head = el("div", "head");
    head.appendChild(el("span", "role", summary ? "compaction summary" : role));
    var link = el("a", null, "seq " + n.seq);
    link.setAttribute("href", "#seq=" + n.seq);
    head.appendChild(link);
    var w = when(n.time);
    if (w) head.appendChild(w);
    if (m && m.source && m.source.kind === "model" && m.source.model) head.appendChild(el("span", null, str(m.source.model)));
    box.appendChild(head);
    (findingsAt.get(n.seq) || []).forEach(function (f) {
      box.appendChild(findingLine(f));
    });
    if (!m) {
      box.appendChild(el("div", "note", "(derives no message)"));
    } else if (role === "system" || role === "developer") {
      box.appendChild(lazy(role + " prompt", function () {
        var d = el("div");
        blocks(m.content, d, null);
        return d;
      }));
    } else {
      blocks(m.content, box, calls);
    }
    var isResult = m && (n.type === "tool/result" || role === "tool");
    if (isResult && isErrorResult(m)) box.classList.add("is-error");
    var call = isResult ? calls.get(resultCallId(m)) : null;
    if (call) call.appendChild(box);
    else into.appendChild(box);
    if (n.kids) {
      var hist = el("details", "history");
      hist.appendChild(el("summary", null, plural(n.replaced, "earlier surface node") + " replaced here (history the model no longer sees)"));
      hist.addEventListener("toggle", function () {
        if (hist.open) fill(i);
      });
      box.appendChild(hist);
      n.hist = hist;
    }
    n.el = box;
    if (searchKeep) {
      box.classList.toggle("hidden", !searchKeep[i]);
      box.classList.toggle("hit", !!searchHit[i]);
    }
  }
  // Render a list of sibling nodes; tool results join the calls among them.
  function renderList(list, into) {
    var calls = new Map();
    var frag = document.createDocumentFragment();
    var lastTurn = null;
    for (var k = 0; k < list.length; k++) {
      var n = nodes[list[k]];
      if (n.depth === 0 && typeof n.turn === "number" && n.turn !== lastTurn && n.turn > 0) {
        lastTurn = n.turn;
        var h = turnHeader(n.turn);
        if (searchKeep) h.classList.add("hidden");
        frag.appendChild(h);
      }
      renderNode(list[k], calls, frag);
    }
    into.appendChild(frag);
  }
  // The history under replacement i, built once.
  function fill(i) {
    var n = nodes[i];
    if (n.filled || !n.kids) return;
    n.filled = true;
    renderList(n.kids, n.hist);
  }
  var frag = document.createDocumentFragment();
  renderList(roots, frag);

  // The header: facts, findings, tool definitions, sub-agent links.
  var facts = document.getElementById("facts");
  function fact(text) {
    facts.appendChild(el("span", null, text));
  }
  if (D.session) fact("session " + D.session);
  if (typeof D.version === "number") fact("format v" + D.version);
  var created = when(D.created);
  if (created) {
    var s = el("span", null, "created ");
    s.appendChild(created);
    facts.appendChild(s);
  }
  if (D.cwd) fact(D.cwd);
  fact(plural(shown, "message") + " on the surface");
  fact(plural((D.turns || []).length, "turn"));
  if (typeof D.at === "number") fact("as it stood after seq " + D.at);
  if (D.tokens) fact(tokenText(D.tokens));
  fact(typeof D.redacted === "number" ? plural(D.redacted, "secret") + " redacted" : "not redacted");
  var safeHref = /^[A-Za-z0-9._-]+\.html$/;
  function pageLink(label, href) {
    var a = el("a", null, label);
    if (safeHref.test(href)) a.setAttribute("href", href);
    return a;
  }
  var top = el("div");
  if (D.parentPage && D.parentPage.href) {
    var p = el("div", "note", "sub-agent of ");
    p.appendChild(pageLink(str(D.parentPage.label), D.parentPage.href));
    top.appendChild(p);
  }
  if (D.children && D.children.length) {
    var c = el("details", null);
    c.appendChild(el("summary", null, plural(D.children.length, "sub-agent session")));
    D.children.forEach(function (ch) {
      var d = el("div");
      d.appendChild(pageLink(str(ch.label), ch.href));
      c.appendChild(d);
    });
    top.appendChild(c);
  }
  var fs = D.findings || [];
  if (fs.length) {
    var errors = fs.filter(function (f) {
      return f.severity === "error";
    }).length;
    var fd = el("details", null);
    fd.appendChild(el("summary", null, "validation: " + plural(errors, "error") + ", " +
      plural(fs.length - errors, "warning") + (D.findingsOmitted ? " (" + num(D.findingsOmitted) + " more not kept)" : "")));
    fs.forEach(function (f) {
      var line = findingLine(f);
      if (typeof f.seq === "number" && bySeq.has(f.seq)) {
        var a = el("a", null, " →");
        a.setAttribute("href", "#seq=" + f.seq);
        line.appendChild(a);
      }
      fd.appendChild(line);
    });
    top.appendChild(fd);
  }
  if (D.system !== undefined && D.system !== null) {
    top.appendChild(lazy("system prompt (request header)", function () {
      var d = el("div");
      if (Array.isArray(D.system)) blocks(D.system, d, null);
      else d.appendChild(textBlock(str(D.system)));
      return d;
    }));
  }
  if (Array.isArray(D.tools) && D.tools.length) {
    top.appendChild(lazy("tool definitions (" + D.tools.length + ")", function () {
      var d = el("div");
      D.tools.forEach(function (t) {
        var one = el("div", "call");
        one.appendChild(el("div", "name", str(t && t.name)));
        if (t && t.description) one.appendChild(textBlock(t.description));
        one.appendChild(textBlock(JSON.stringify(t && t.parameters, null, 2), "code"));
        d.appendChild(one);
      });
      return d;
    }));
  }
  log.textContent = "";
  log.appendChild(top);
  log.appendChild(frag);
  if (!nodes.length) log.appendChild(el("p", "note", "The surface is empty."));

  // Search: a message stays when it, or a message folded under it, holds the text.
  var texts = [];
  function textOf(i) {
    if (texts[i] === undefined) {
      var parts = [];
      (function walk(v) {
        if (typeof v === "string") parts.push(v);
        else if (Array.isArray(v)) v.forEach(walk);
        else if (v && typeof v === "object") Object.keys(v).forEach(function (k) {
          walk(v[k]);
        });
      })(nodes[i].m);
      texts[i] = parts.join("\n").toLowerCase();
    }
    return texts[i];
  }
  // Open (and build) every history above node i, outermost first.
  function openTo(i) {
    var up = [];
    for (var p = nodes[i].parent; p >= 0; p = nodes[p].parent) up.push(p);
    for (var k = up.length - 1; k >= 0; k--) {
      fill(up[k]);
      nodes[up[k]].hist.open = true;
    }
  }
  var count = document.getElementById("count");
  var turns = log.getElementsByClassName("turn");
  function search(q) {
    q = q.trim().toLowerCase();
    var keep = new Uint8Array(nodes.length);
    var hit = new Uint8Array(nodes.length);
    var hits = 0;
    for (var i = 0; q !== "" && i < nodes.length; i++) {
      if (!nodes[i].m || textOf(i).indexOf(q) < 0) continue;
      hit[i] = 1;
      hits += 1;
      for (var j = i; j >= 0 && !keep[j]; j = nodes[j].parent) keep[j] = 1;
    }
    searchKeep = q === "" ? null : keep;
    searchHit = q === "" ? null : hit;
    for (var h = 0; h < nodes.length; h++) if (hit[h]) openTo(h);
    for (var k = 0; k < nodes.length; k++) {
      if (!nodes[k].el) continue;
      nodes[k].el.classList.toggle("hidden", q !== "" && !keep[k]);
      nodes[k].el.classList.toggle("hit", !!hit[k]);
    }
    for (var t = 0; t < turns.length; t++) turns[t].classList.toggle("hidden", q !== "");
    count.textContent = q === "" ? "" : plural(hits, "message") + " match";
  }
  var input = document.getElementById("q");
  input.addEventListener("input", function () {
    search(input.value);
    try {
      history.replaceState(null, "", input.value ? "#q=" + encodeURIComponent(input.value) : "#");
    } catch (e) {
      // file:// pages in some browsers refuse; the search itself still works.
    }
  });
  function fromHash() {
    var h = location.hash.slice(1);
    var q = /^q=(.*)$/.exec(h);
    var s = /^seq=(\d+)$/.exec(h);
    if (q) {
      var v;
      try {
        v = decodeURIComponent(q[1].replace(/\+/g, " "));
      } catch (e) {
        v = q[1];
      }
      input.value = v;
      search(v);
    } else if (s && bySeq.has(Number(s[1]))) {
      var i = bySeq.get(Number(s[1]));
      search("");
      openTo(i);
      nodes[i].el.classList.add("hit");
      nodes[i].el.scrollIntoView();
    }
  }
  window.addEventListener("hashchange", fromHash);
  fromHash();
  root.setAttribute("data-rendered", String(shown));
  // Milliseconds from navigation to the rendered page (what the benchmark reads).
  if (window.performance && performance.now) root.setAttribute("data-render-ms", String(Math.round(performance.now())));
  // What a test reads after the script ran: no resource was fetched.
  if (window.performance && performance.getEntriesByType) {
    root.setAttribute("data-resources", String(performance.getEntriesByType("resource").length));
  }
})();
