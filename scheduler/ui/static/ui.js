// celos UI: opens slot details in a side panel, selects ranges, and posts
// actions (rerun, kill, pause) to the HTTP API the CLI uses. No framework,
// no build step; the grid itself is rendered by the server.
(function () {
  "use strict";
  var body = document.body;
  var base = body.dataset.base || "/ui";
  var api = body.dataset.api || "";
  var tokenRequired = body.dataset.tokenRequired === "true";
  var TOKEN_KEY = "celos.token";
  var STATES = { s: "SUCCESS", w: "WAITING", r: "READY", u: "RUNNING", k: "KILLED", t: "WAIT_TIMEOUT", f: "FAILURE" };

  var grid = document.getElementById("grid");
  var wrap = document.getElementById("gridwrap");
  var drawer = document.getElementById("drawer");
  var dbody = document.getElementById("drawer-body");
  var zoom = grid ? +grid.dataset.zoom : 0;
  var ticks = [];
  if (grid) {
    grid.querySelectorAll("#ticks b").forEach(function (b) { ticks.push(+b.dataset.t); });
  }
  var backStack = []; // drawer URLs, for Back
  var current = null; // the drawer's URL
  var anchor = null;  // {row, col}: the first cell of a range selection

  function $(id) { return document.getElementById(id); }
  function iso(t) { return new Date(t * 1000).toISOString(); }
  function short(t) { return iso(t).slice(0, 16).replace("T", " "); }
  function token() { try { return localStorage.getItem(TOKEN_KEY) || ""; } catch (e) { return ""; } }
  function setToken(v) {
    try { if (v) { localStorage.setItem(TOKEN_KEY, v); } else { localStorage.removeItem(TOKEN_KEY); } } catch (e) { /* private mode */ }
    showTokenState();
  }
  function showTokenState() {
    var b = $("token-btn");
    if (b) { b.classList.toggle("set", !!token()); }
  }

  // ---- the drawer -------------------------------------------------------

  function openDrawer(url, push) {
    if (!drawer) { location.href = url; return; }
    if (push && current && current !== url) { backStack.push(current); }
    current = url;
    drawer.hidden = false;
    dbody.classList.add("loading");
    $("drawer-back").hidden = backStack.length === 0;
    $("drawer-link").href = url;
    var rel = url.indexOf(base + "/") === 0 ? url.slice(base.length + 1) : url;
    replaceHash("d=" + encodeURIComponent(rel));
    return fetch(url + (url.indexOf("?") >= 0 ? "&" : "?") + "f=1", { headers: { "Accept": "text/html" } })
      .then(function (res) { return res.text(); })
      .then(function (html) {
        if (current !== url) { return; }
        dbody.innerHTML = html;
        dbody.classList.remove("loading");
        dbody.scrollTop = 0;
      })
      .catch(function (err) {
        dbody.classList.remove("loading");
        dbody.innerHTML = '<div class="detail"><p class="error"></p></div>';
        dbody.querySelector(".error").textContent = "Could not load details: " + err;
      });
  }

  function closeDrawer() {
    if (!drawer) { return; }
    drawer.hidden = true;
    current = null;
    backStack = [];
    clearSelection();
    replaceHash("");
  }

  function replaceHash(h) {
    var url = location.pathname + location.search + (h ? "#" + h : "");
    window.history.replaceState(null, "", url);
  }

  // ---- grid cells -------------------------------------------------------

  function clearSelection() {
    if (!grid) { return; }
    grid.querySelectorAll(".row > i.sel").forEach(function (c) { c.classList.remove("sel"); });
  }

  // cellAt returns the element of bucket col in a row (its first child is
  // the name).
  function cellAt(row, col) { return row.children[col + 1]; }
  function colOf(cell) { return Array.prototype.indexOf.call(cell.parentElement.children, cell) - 1; }

  function selectCells(row, from, to) {
    clearSelection();
    for (var c = from; c <= to; c++) {
      var cell = cellAt(row, c);
      if (cell && cell.tagName === "I") { cell.classList.add("sel"); }
    }
  }

  function slotURL(id, start, end) {
    return base + "/slot?id=" + encodeURIComponent(id) + "&start=" + encodeURIComponent(iso(start)) + "&end=" + encodeURIComponent(iso(end));
  }

  if (grid) {
    grid.addEventListener("click", function (ev) {
      var a = ev.target.closest("a.wid");
      if (a && !ev.ctrlKey && !ev.metaKey) {
        ev.preventDefault();
        clearSelection();
        openDrawer(a.getAttribute("href"), false);
        backStack = [];
        return;
      }
      var fold = ev.target.closest("button.fold");
      if (fold) {
        var tb = fold.closest("section.grp");
        tb.classList.toggle("folded");
        fold.setAttribute("aria-expanded", tb.classList.contains("folded") ? "false" : "true");
        saveFolds();
        return;
      }
      var cell = ev.target.closest(".row > i");
      if (cell) { openCell(cell, ev.shiftKey); }
    });

    // Keyboard: the grid is one tab stop; the arrow keys (and Home, End,
    // PageUp, PageDown) move a cursor over the cells, Enter or Space opens
    // the cell under it as a click does, Shift+Enter selects a range.
    grid.tabIndex = 0;
    var live = document.createElement("span");
    live.className = "sr";
    live.setAttribute("aria-live", "polite");
    grid.parentNode.insertBefore(live, grid);
    // A mouse click focuses the grid too: then the click places the cursor,
    // and the focus must not scroll to the first cell.
    var pointing = false;
    grid.addEventListener("mousedown", function () { pointing = true; });
    document.addEventListener("mouseup", function () { pointing = false; });
    grid.addEventListener("focus", function () {
      if (pointing) { return; }
      if (!cursor || !cursor.isConnected || !visible(cursor.parentElement)) {
        var rows = cellRows();
        if (rows.length) { moveCursor(rows[0], 0); }
      } else {
        moveCursor(cursor.parentElement, colOf(cursor));
      }
    });
    grid.addEventListener("blur", function () { if (cursor) { cursor.classList.remove("kb"); } });
    grid.addEventListener("keydown", function (ev) {
      if (ev.target !== grid || ev.altKey || ev.ctrlKey || ev.metaKey) { return; }
      if (!cursor) { return; }
      var row = cursor.parentElement, col = colOf(cursor);
      var rows = cellRows(), r = rows.indexOf(row);
      switch (ev.key) {
        case "ArrowLeft": col = Math.max(0, col - 1); break;
        case "ArrowRight": col = Math.min(ticks.length - 1, col + 1); break;
        case "Home": col = 0; break;
        case "End": col = ticks.length - 1; break;
        case "ArrowUp": r = Math.max(0, r - 1); break;
        case "ArrowDown": r = Math.min(rows.length - 1, r + 1); break;
        case "PageUp":
          if (r === 0 && pageLink("prev")) { ev.preventDefault(); location.href = pageLink("prev"); return; }
          r = Math.max(0, r - 10); break;
        case "PageDown":
          if (r === rows.length - 1 && pageLink("next")) { ev.preventDefault(); location.href = pageLink("next"); return; }
          r = Math.min(rows.length - 1, r + 10); break;
        case "Enter": case " ":
          ev.preventDefault();
          openCell(cursor, ev.shiftKey);
          return;
        default: return;
      }
      ev.preventDefault();
      if (r >= 0 && rows[r]) { moveCursor(rows[r], col); }
    });
  }

  var cursor = null; // the keyboard's cell

  // pageLink is the URL of the previous or next page of rows, if any.
  function pageLink(rel) {
    var a = document.querySelector(".pager a.page-" + rel);
    return a ? a.getAttribute("href") : null;
  }

  // cellRows lists the rows that have cells and are shown (not filtered out
  // or folded).
  function cellRows() {
    return Array.prototype.filter.call(grid.querySelectorAll(".row"), function (row) {
      return row.children.length > 1 && row.children[1].tagName === "I" && visible(row);
    });
  }
  function visible(row) { return !!row && row.isConnected && row.offsetParent !== null; }

  function moveCursor(row, col) {
    var cell = cellAt(row, col);
    if (!cell || cell.tagName !== "I") { return; }
    if (cursor) { cursor.classList.remove("kb"); }
    cursor = cell;
    cell.classList.add("kb");
    cell.scrollIntoView({ block: "nearest", inline: "nearest" });
    live.textContent = cellLabel(cell);
  }

  // openCell opens the details of a cell, or with shift of the range from
  // the last opened cell of the same row to this one.
  function openCell(cell, shift) {
    var row = cell.parentElement;
    var id = row.dataset.w;
    var col = colOf(cell);
    if (!id || col < 0 || col >= ticks.length) { return; }
    backStack = [];
    if (cursor !== cell && document.activeElement === grid) { moveCursor(row, col); }
    if (shift && anchor && anchor.row === row && anchor.col !== col) {
      var lo = Math.min(anchor.col, col), hi = Math.max(anchor.col, col);
      selectCells(row, lo, hi);
      // Newest on the left: column lo is the newest bucket.
      openDrawer(slotURL(id, ticks[hi], ticks[lo] + zoom), false);
      return;
    }
    anchor = { row: row, col: col };
    selectCells(row, col, col);
    openDrawer(slotURL(id, ticks[col], ticks[col] + zoom), false);
  }

  // cellLabel says what a cell holds: its tooltip, and what the keyboard
  // cursor announces.
  function cellLabel(cell) {
    var col = colOf(cell);
    var id = cell.parentElement.dataset.w;
    var s = id + " · " + short(ticks[col]) + " UTC";
    var cls = cell.className.replace("sel", "").replace("kb", "").trim();
    if (cls && STATES[cls]) {
      var n = cell.textContent;
      s += n ? " · " + n + " slots, worst " + STATES[cls] : " · " + STATES[cls];
    } else {
      s += " · no slot";
    }
    if (cell.parentElement.classList.contains("p")) { s += " · workflow paused"; }
    return s;
  }

  if (grid) {

    // Tooltips are made on demand rather than shipped with every cell.
    grid.addEventListener("mouseover", function (ev) {
      var cell = ev.target.closest(".row > i");
      if (!cell || cell.title) { return; }
      if (!cell.parentElement.dataset.w || colOf(cell) < 0) { return; }
      cell.title = cellLabel(cell);
    });
  }

  // Links inside the drawer open in the drawer.
  if (dbody) {
    dbody.addEventListener("click", function (ev) {
      var a = ev.target.closest("a.dl");
      if (a && !ev.ctrlKey && !ev.metaKey && !ev.shiftKey) {
        ev.preventDefault();
        openDrawer(a.getAttribute("href"), true);
        return;
      }
      var b = ev.target.closest("button[data-act]");
      // While other details load, the panel still shows the previous ones:
      // their buttons must not act.
      if (b && !dbody.classList.contains("loading")) { act(b); }
    });
    $("drawer-close").addEventListener("click", closeDrawer);
    $("drawer-back").addEventListener("click", function () {
      var prev = backStack.pop();
      if (prev) { current = null; openDrawer(prev, false); }
    });
  } else {
    // A standalone detail page (no panel, so nothing loads in place): its
    // buttons act too.
    document.addEventListener("click", function (ev) {
      var b = ev.target.closest("button[data-act]");
      if (b) { act(b); }
    });
  }

  // ---- actions ----------------------------------------------------------

  function describe(b) {
    var what = b.dataset.act, id = b.dataset.id;
    var times = (b.dataset.times || "").split(" ").filter(Boolean);
    var n = times.length;
    var slots = n === 1 ? "slot " + id + "@" + times[0] : n + " slots of " + id + " (" + times[n - 1] + " … " + times[0] + ")";
    switch (what) {
      case "rerun": return { title: n === 1 ? "Rerun this slot?" : "Rerun " + n + " slots?", text: "The " + slots + " will be reset to WAITING and run again when their triggers are ready.", times: times };
      case "kill": return { title: n === 1 ? "Kill this slot?" : "Kill " + n + " slots?", text: "The " + slots + " will be marked KILLED, and a running job will be stopped.", times: times, danger: true };
      case "pause": return { title: "Pause " + id + "?", text: "No new slots of " + id + " will be submitted until it is unpaused. Running jobs go on." };
      case "unpause": return { title: "Unpause " + id + "?", text: "The scheduler will submit slots of " + id + " again." };
    }
    return null;
  }

  function post(path, params) {
    var headers = {};
    var t = token();
    if (t) { headers["Authorization"] = "Bearer " + t; }
    var qs = Object.keys(params).map(function (k) { return encodeURIComponent(k) + "=" + encodeURIComponent(params[k]); }).join("&");
    return fetch(api + path + "?" + qs, { method: "POST", headers: headers, credentials: "same-origin" }).then(function (res) {
      if (res.ok) { return null; }
      return res.text().then(function (txt) {
        var msg = txt;
        try { msg = JSON.parse(txt).error || txt; } catch (e) { /* not JSON */ }
        var err = new Error(msg || res.status + " " + res.statusText);
        err.status = res.status;
        throw err;
      });
    });
  }

  function act(b) {
    var d = describe(b);
    if (!d) { return; }
    if (tokenRequired && !token()) {
      askToken().then(function (ok) { if (ok) { act(b); } });
      return;
    }
    var dlg = $("confirm");
    dlg.querySelector(".ct").textContent = d.title;
    dlg.querySelector(".cm").textContent = d.text;
    var prog = dlg.querySelector(".cprog"), bar = prog.querySelector("progress"), ptext = prog.querySelector(".cprog-t");
    var errBox = dlg.querySelector(".cerr");
    var ok = $("confirm-ok");
    var cancel = dlg.querySelector('button[value="cancel"]');
    prog.hidden = true; errBox.hidden = true; errBox.textContent = "";
    ok.disabled = false; ok.hidden = false; cancel.textContent = "Cancel";
    ok.textContent = d.title.replace(/\?$/, "").replace(/ this slot| [0-9]+ slots| \S+$/, "") || "Confirm";
    ok.className = "btn " + (d.danger ? "danger" : "primary");
    dlg.returnValue = "";
    dlg.onclose = null;
    ok.onclick = function (ev) {
      ev.preventDefault();
      ok.disabled = true;
      run(b, d, function (done, total) {
        if (total > 1) { prog.hidden = false; bar.max = total; bar.value = done; ptext.textContent = done + " / " + total; }
      }).then(function () {
        dlg.close("done");
        reload();
      }).catch(function (err) {
        if (err.status === 401 || err.status === 403) {
          dlg.close("auth");
          askToken(err.message).then(function (saved) { if (saved) { act(b); } });
          return;
        }
        errBox.hidden = false;
        errBox.textContent = err.message;
        ok.disabled = false;
        if (!err.status || err.status >= 500) {
          ok.textContent = "Retry"; // the server or the network failed: trying again may help
        } else {
          ok.hidden = true; // the API refused: show what it said, then the current state
          cancel.textContent = "Close";
        }
        dlg.onclose = function () {
          if (err.partial) { reload(); } else if (current) { var u = current; current = null; openDrawer(u, false); }
        };
      });
    };
    dlg.showModal();
  }

  // run posts the action, one request per slot, in order, stopping at the
  // first error (which says how many went through).
  function run(b, d, progress) {
    var what = b.dataset.act, id = b.dataset.id;
    if (what === "pause" || what === "unpause") {
      return post("/pause", { id: id, paused: what === "pause" ? "true" : "false" });
    }
    var times = d.times, i = 0;
    progress(0, times.length);
    function next() {
      if (i >= times.length) { return Promise.resolve(); }
      return post("/" + what, { id: id, time: times[i] }).then(function () {
        i++;
        progress(i, times.length);
        return next();
      }, function (err) {
        if (times.length > 1) {
          err.message = id + "@" + times[i] + ": " + err.message + (i > 0 ? "\n(" + i + " of " + times.length + " done before this error)" : "");
          err.partial = i > 0;
        }
        throw err;
      });
    }
    return next();
  }

  // reload shows the new state: the page comes back with the same window,
  // scroll position and details panel.
  function reload() {
    saveScroll();
    location.reload();
  }

  function askToken(reason) {
    var dlg = $("tokendlg");
    var input = $("token-input");
    input.value = token();
    var p = dlg.querySelector("p");
    if (reason) { p.dataset.orig = p.dataset.orig || p.textContent; p.textContent = "The server refused the action: " + reason; }
    else if (p.dataset.orig) { p.textContent = p.dataset.orig; }
    return new Promise(function (resolve) {
      dlg.onclose = function () {
        if (dlg.returnValue === "save") { setToken(input.value.trim()); resolve(!!input.value.trim()); }
        else if (dlg.returnValue === "forget") { setToken(""); resolve(false); }
        else { resolve(false); }
      };
      dlg.returnValue = "";
      dlg.showModal();
      input.focus();
    });
  }
  var tb = $("token-btn");
  if (tb) { tb.addEventListener("click", function () { askToken(); }); }
  showTokenState();

  // ---- filtering, folding, refresh --------------------------------------

  var filter = $("filter"), problems = $("problems"), auto = $("autorefresh");
  function applyFilter() {
    if (!grid) { return; }
    var q = (filter.value || "").trim().toLowerCase();
    var onlyBad = problems.checked;
    var shown = 0;
    grid.querySelectorAll("section.grp").forEach(function (tb) {
      var any = false;
      tb.querySelectorAll(".row").forEach(function (row) {
        var ok = (!q || row.dataset.w.toLowerCase().indexOf(q) >= 0) &&
          (!onlyBad || row.classList.contains("x") || row.classList.contains("miss"));
        row.hidden = !ok;
        if (ok) { any = true; shown++; }
      });
      tb.hidden = !any && (q !== "" || onlyBad);
    });
    $("nomatch").hidden = shown > 0 || (!q && !onlyBad);
    try { sessionStorage.setItem("celos.filter", JSON.stringify({ q: filter.value, bad: onlyBad })); } catch (e) { /* ignore */ }
  }
  // A grid of several pages (or already filtered by the server) filters
  // on the server, over every workflow: Enter, or a pause in typing, loads
  // the filtered view; the rows of this page are filtered at once meanwhile.
  var paged = !!grid && grid.dataset.paged === "1";
  var filterTimer = null;
  function serverFilter() {
    clearTimeout(filterTimer);
    var u = grid.dataset.url, params = [], q = filter.value.trim();
    if (q) { params.push("q=" + encodeURIComponent(q)); }
    if (problems.checked) { params.push("problems=1"); }
    var target = u + (params.length ? (u.indexOf("?") >= 0 ? "&" : "?") + params.join("&") : "");
    if (target !== location.pathname + location.search) { location.href = target; }
  }
  if (filter) {
    if (!paged) {
      try {
        var saved = JSON.parse(sessionStorage.getItem("celos.filter") || "null");
        if (saved) { filter.value = saved.q || ""; problems.checked = !!saved.bad; }
      } catch (e) { /* ignore */ }
    }
    filter.addEventListener("input", function () {
      applyFilter();
      if (paged) { clearTimeout(filterTimer); filterTimer = setTimeout(serverFilter, 700); }
    });
    filter.addEventListener("keydown", function (ev) {
      if (ev.key === "Enter" && paged) { ev.preventDefault(); serverFilter(); }
    });
    problems.addEventListener("change", function () { if (paged) { serverFilter(); } else { applyFilter(); } });
    if (!paged) { applyFilter(); }
  }

  function saveFolds() {
    var folded = [];
    grid.querySelectorAll("section.grp.folded").forEach(function (tb) { folded.push(tb.dataset.group); });
    try { localStorage.setItem("celos.folded", JSON.stringify(folded)); } catch (e) { /* ignore */ }
  }
  if (grid) {
    try {
      var folded = JSON.parse(localStorage.getItem("celos.folded") || "[]");
      grid.querySelectorAll("section.grp").forEach(function (tb) {
        if (folded.indexOf(tb.dataset.group) >= 0) { tb.classList.add("folded"); }
      });
    } catch (e) { /* ignore */ }
  }

  function saveScroll() {
    if (!wrap) { return; }
    try { sessionStorage.setItem("celos.scroll", JSON.stringify({ p: location.pathname + location.search, x: wrap.scrollLeft, y: wrap.scrollTop })); } catch (e) { /* ignore */ }
  }
  if (wrap) {
    try {
      var sc = JSON.parse(sessionStorage.getItem("celos.scroll") || "null");
      if (sc && sc.p === location.pathname + location.search) { wrap.scrollLeft = sc.x; wrap.scrollTop = sc.y; }
    } catch (e) { /* ignore */ }
    window.addEventListener("beforeunload", saveScroll);
  }

  var timer = null;
  function schedule() {
    clearTimeout(timer);
    if (auto && auto.checked) {
      timer = setTimeout(function () {
        var busy = document.querySelector("dialog[open]");
        if (busy) { schedule(); return; }
        reload();
      }, 30000);
    }
  }
  if (auto) {
    try { auto.checked = localStorage.getItem("celos.autorefresh") === "1"; } catch (e) { /* ignore */ }
    auto.addEventListener("change", function () {
      try { localStorage.setItem("celos.autorefresh", auto.checked ? "1" : "0"); } catch (e) { /* ignore */ }
      schedule();
    });
    schedule();
  }

  document.addEventListener("keydown", function (ev) {
    if (ev.key === "Escape" && !document.querySelector("dialog[open]") && drawer && !drawer.hidden) {
      closeDrawer();
    } else if (ev.key === "/" && filter && document.activeElement !== filter && !/INPUT|TEXTAREA/.test(document.activeElement.tagName)) {
      ev.preventDefault();
      filter.focus();
    }
  });

  // Reopen the details named in the URL (after an action, or a shared link).
  var m = /^#d=(.+)$/.exec(location.hash);
  if (m && drawer) {
    var rel = decodeURIComponent(m[1]);
    if (/^(slot|workflow)\?/.test(rel)) {
      openDrawer(base + "/" + rel, false);
      var params = new URLSearchParams(rel.split("?")[1]);
      var id = params.get("id"), start = params.get("start"), end = params.get("end");
      if (grid && id && start && end) {
        var s = Date.parse(start) / 1000, e = Date.parse(end) / 1000;
        var row = grid.querySelector('.row[data-w="' + (window.CSS && CSS.escape ? CSS.escape(id) : id) + '"]');
        if (row) {
          var cols = [];
          ticks.forEach(function (t, i) { if (t >= s && t < e) { cols.push(i); } });
          if (cols.length) { selectCells(row, cols[0], cols[cols.length - 1]); anchor = { row: row, col: cols[0] }; }
        }
      }
    }
  }
})();
