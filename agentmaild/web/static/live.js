/* agentmaild dashboard: live fragments over server-sent events (no build step, no framework).
 * <body data-live="/events?topic=…"> opens one EventSource; each element with data-sse="NAME"
 * is brought to the server-rendered (already escaped) HTML of event NAME.
 * The fragment is parsed off the document (a <template>) and the live element is patched:
 * nodes equal to the new ones are left alone, rows keyed by id or data-delivery are matched by
 * key (a new timeline row is one insertion, not 60 replaced rows), and only changed text and
 * attributes are written, so the browser restyles, lays out and repaints what changed, not the
 * whole view. htmx sees only the elements that are new or whose attributes changed.
 * A dropped or broken stream is reopened by the browser (the server sends "retry: 1000"). */
(function () {
  "use strict";
  var url = document.body.getAttribute("data-live");
  if (!url || !window.EventSource) { return; }
  var status = document.getElementById("live-status");
  function show(text, cls) {
    if (status) { status.textContent = text; status.className = "live " + cls; }
  }

  var HX = "[hx-get],[hx-post],[hx-put],[hx-patch],[hx-delete],[hx-trigger],[hx-boost]";

  function key(node) {
    if (node.nodeType !== 1) { return null; }
    return node.id || node.getAttribute("data-delivery") || null;
  }

  function hasHx(el) {
    for (var i = 0; i < el.attributes.length; i++) {
      if (el.attributes[i].name.lastIndexOf("hx-", 0) === 0) { return true; }
    }
    return false;
  }

  /* Make old's attributes those of next; true when one changed. */
  function syncAttributes(old, next) {
    var changed = false, i, a;
    for (i = old.attributes.length - 1; i >= 0; i--) {
      a = old.attributes[i].name;
      if (!next.hasAttribute(a)) { old.removeAttribute(a); changed = true; }
    }
    for (i = 0; i < next.attributes.length; i++) {
      a = next.attributes[i];
      if (old.getAttribute(a.name) !== a.value) { old.setAttribute(a.name, a.value); changed = true; }
    }
    return changed;
  }

  /* Bring old (in the page) to next (parsed); the elements htmx must look at go in fresh. */
  function patch(old, next, fresh) {
    if (old.isEqualNode(next)) { return; }
    if (old.nodeType !== 1) { old.nodeValue = next.nodeValue; return; }
    if (syncAttributes(old, next) && hasHx(old)) { fresh.push(old); }
    patchChildren(old, next, fresh);
  }

  function patchChildren(parent, next, fresh) {
    var keyed = {}, node, k;
    for (node = parent.firstChild; node; node = node.nextSibling) {
      k = key(node);
      if (k) { keyed[k] = node; }
    }
    var cur = parent.firstChild, n = next.firstChild, following, match;
    while (n) {
      following = n.nextSibling;
      k = key(n);
      match = null;
      if (k) {
        match = keyed[k] && keyed[k].nodeName === n.nodeName ? keyed[k] : null;
        delete keyed[k];
        // Unkeyed nodes before the match (an in-flight row that has landed) go, rather than
        // every keyed row after them being moved up past them.
        while (match && cur && cur !== match && !key(cur)) {
          following = cur.nextSibling;
          parent.removeChild(cur);
          cur = following;
        }
        following = n.nextSibling;
      } else if (cur && !key(cur) && cur.nodeType === n.nodeType && cur.nodeName === n.nodeName) {
        match = cur;
      }
      if (!match) {
        parent.insertBefore(n, cur);  // moved out of the template
        if (n.nodeType === 1) { fresh.push(n); }
      } else {
        if (match === cur) { cur = cur.nextSibling; } else { parent.insertBefore(match, cur); }
        patch(match, n, fresh);
      }
      n = following;
    }
    while (cur) {
      following = cur.nextSibling;
      parent.removeChild(cur);
      cur = following;
    }
  }

  function apply(el, html) {
    var template = document.createElement("template");
    template.innerHTML = html;
    var fresh = [];
    patchChildren(el, template.content, fresh);
    if (window.htmx) {
      fresh.forEach(function (node) {
        if (hasHx(node) || node.querySelector(HX)) {
          window.htmx.process(node);
        }
      });
    }
  }

  var source = new EventSource(url);
  source.onopen = function () { show("live", "on"); };
  source.onerror = function () { show("reconnecting…", "off"); };
  var targets = document.querySelectorAll("[data-sse]");
  Array.prototype.forEach.call(targets, function (el) {
    var last = null;
    source.addEventListener(el.getAttribute("data-sse"), function (event) {
      if (event.data !== last) {
        last = event.data;
        apply(el, event.data);
      }
      el.setAttribute("data-updates", String(Number(el.getAttribute("data-updates") || 0) + 1));
    });
  });
})();
