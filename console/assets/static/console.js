// The toolwire console's one script: it follows /events and, when a topic
// the page shows changes, fetches the page's changing part again (rendered
// and escaped by the server) in place of the old one. It adds no handler
// to the page's markup; the forms work without it.
(function () {
  'use strict';
  var body = document.body;
  var live = document.getElementById('live');
  var content = document.getElementById('content');
  var topics = (body.getAttribute('data-topics') || '').split(' ').filter(Boolean);
  if (!live || !content || !topics.length || !window.EventSource) {
    return;
  }
  var busy = false, again = false, held = false, last = 0;
  // A busy gateway changes its audit log many times a second: the page is
  // fetched at most once a second, the last change always included.
  var minGap = 1000;

  function setLive(text, cls) {
    live.textContent = text;
    live.className = 'live ' + cls;
  }

  // An operator in the middle of choosing (a scope, a duration) keeps the
  // form they are using: the page is fetched once they leave it.
  function choosing() {
    var el = document.activeElement;
    return el && el !== body && content.contains(el) && (el.tagName === 'SELECT' || el.tagName === 'INPUT');
  }

  function refresh() {
    if (busy) {
      again = true;
      return;
    }
    if (choosing()) {
      held = true;
      return;
    }
    var wait = last + minGap - Date.now();
    if (wait > 0) {
      busy = true;
      setTimeout(function () {
        busy = false;
        refresh();
      }, wait);
      return;
    }
    busy = true;
    last = Date.now();
    fetch(location.pathname + '?part=content', { credentials: 'same-origin', cache: 'no-store' })
      .then(function (r) {
        if (r.status === 401) {
          location.assign('/login');
          return null;
        }
        if (!r.ok) {
          throw new Error('HTTP ' + r.status);
        }
        return r.text();
      })
      .then(function (html) {
        if (html === null) {
          return;
        }
        if (choosing()) {
          held = true;
          return;
        }
        content.innerHTML = html;
        body.setAttribute('data-refreshed', String(Number(body.getAttribute('data-refreshed')) + 1));
      })
      .catch(function () { setLive('update failed', 'off'); })
      .then(function () {
        busy = false;
        if (again) {
          again = false;
          refresh();
        }
      });
  }

  document.addEventListener('focusout', function () {
    if (held) {
      held = false;
      setTimeout(refresh, 0);
    }
  });

  var es = new EventSource('/events');
  es.addEventListener('open', function () {
    setLive('live', 'on');
    body.setAttribute('data-live', 'on');
  });
  es.addEventListener('error', function () {
    if (es.readyState === EventSource.CLOSED) {
      setLive('signed out or stopped: reload', 'off');
    } else {
      setLive('reconnecting…', '');
    }
  });
  es.addEventListener('change', function (e) {
    if (topics.indexOf(e.data) >= 0) {
      refresh();
    }
  });
})();
