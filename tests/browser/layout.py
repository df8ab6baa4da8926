"""Measurements of a rendered admin page, taken in the browser: what scrolls sideways, which
columns are cut off, how tall rows are, and whether text stands out from its background."""

from __future__ import annotations

from typing import Any

#: The attempt history's columns, as its header reads.
ATTEMPT_COLUMNS = ["#", "outcome", "worker", "started", "took", "error"]

#: Text the admin's CSS colours, checked against its background in both themes.
COLOURED = (
    ".sq-error-line",
    ".sq-error-old",
    ".sq-sub",
    ".sq-count",
    ".sq-summary-backlog",
    ".sq-quiet",
    ".sq-history tr.sq-run td",
    ".sq-traceback summary",
    ".sq-error",
    ".sq-json",
    ".sq-note",
)
#: WCAG AA for normal text.
MIN_CONTRAST = 4.5


def horizontal_overflow(browser: Any) -> dict[str, list[int]]:
    """Elements wider than the space they have: the page, and the list's scrolling box."""
    return browser.execute_script(
        """
        const out = {};
        const boxes = {page: document.documentElement,
                       results: document.querySelector('#changelist-form .results'),
                       content: document.querySelector('#content')};
        for (const [name, el] of Object.entries(boxes)) {
          if (el && el.scrollWidth > el.clientWidth) out[name] = [el.scrollWidth, el.clientWidth];
        }
        return out;
        """
    )


def clipped_columns(browser: Any, table: str) -> list[str]:
    """Headers of `table` not wholly inside the visible part of the box that holds it."""
    return browser.execute_script(
        """
        const table = document.querySelector(arguments[0]);
        const box = table.closest('.results') || table.parentElement;
        const rect = box.getBoundingClientRect();
        const right = Math.min(rect.left + box.clientWidth, document.documentElement.clientWidth);
        return [...table.querySelectorAll('thead th')]
          .filter(th => { const r = th.getBoundingClientRect();
                          return r.width < 1 || r.right > right + 0.5; })
          .map(th => th.className || th.textContent.trim());
        """,
        table,
    )


def row_heights(browser: Any) -> dict[str, list[float]]:
    """Heights of the job list's rows, those showing an error apart from the others."""
    return browser.execute_script(
        """
        const out = {'error': [], 'no error': []};
        for (const row of document.querySelectorAll('#result_list tbody tr')) {
          const key = row.querySelector('.sq-error-line') ? 'error' : 'no error';
          out[key].push(row.getBoundingClientRect().height);
        }
        return out;
        """
    )


def history_layout(browser: Any) -> dict[str, Any]:
    """The attempt history's headers, their left edges, and whether the table fits its box."""
    return browser.execute_script(
        """
        const table = document.querySelector('.sq-history');
        const box = table.closest('.readonly') || table.parentElement;
        const right = box.getBoundingClientRect().left + box.clientWidth;
        const ths = [...table.querySelectorAll('thead th')];
        return {
          headers: ths.map(th => th.textContent.trim().toLowerCase()),
          lefts: ths.map(th => Math.round(th.getBoundingClientRect().left)),
          overflow: Math.max(0, table.scrollWidth - box.clientWidth,
                             Math.round(table.getBoundingClientRect().right - right)),
          clipped: ths.filter(th => th.getBoundingClientRect().right > right + 0.5)
                      .map(th => th.textContent.trim()),
        };
        """
    )


def contrast_problems(browser: Any) -> list[str]:
    """Coloured text whose contrast with the background behind it is below WCAG AA."""
    return browser.execute_script(
        """
        const parse = c => { const m = c.match(/[\\d.]+/g).map(Number);
                             return {r: m[0], g: m[1], b: m[2], a: m.length > 3 ? m[3] : 1}; };
        const lum = c => { const f = v => { v /= 255;
            return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
          return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b); };
        const background = el => {
          for (; el; el = el.parentElement) {
            const c = parse(getComputedStyle(el).backgroundColor);
            if (c.a >= 0.5) return c;
          }
          return parse(getComputedStyle(document.body).backgroundColor);
        };
        const problems = [];
        for (const selector of arguments[0]) {
          for (const el of document.querySelectorAll(selector)) {
            if (!el.getClientRects().length || !el.textContent.trim()) continue;
            const fg = lum(parse(getComputedStyle(el).color)), bg = lum(background(el));
            const ratio = (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05);
            if (ratio < arguments[1]) problems.push(selector + ': ' + ratio.toFixed(2));
          }
        }
        return [...new Set(problems)];
        """,
        list(COLOURED),
        MIN_CONTRAST,
    )


def visible_characters(browser: Any, element: Any) -> int:
    """How many characters of `element`'s text are on screen: laid out inside its own box,
    every box that clips it (a scrolling list, the window) and, when its text is cut, left
    of the ellipsis that ends it."""
    return browser.execute_script(
        """
        const el = arguments[0];
        if (!el.getClientRects().length) return 0;
        let box = el.getBoundingClientRect();
        let left = box.left, right = box.right;
        const cut = el.scrollWidth > el.clientWidth + 0.5;
        for (let up = el; up && up !== document.documentElement; up = up.parentElement) {
          if (getComputedStyle(up).overflowX === 'visible') continue;
          const r = up.getBoundingClientRect();
          left = Math.max(left, r.left + up.clientLeft);
          right = Math.min(right, r.left + up.clientLeft + up.clientWidth);
        }
        left = Math.max(left, 0);
        right = Math.min(right, document.documentElement.clientWidth);
        if (cut) {
          const probe = document.createElement('span');
          probe.textContent = '\\u2026';
          el.appendChild(probe);
          right -= probe.getBoundingClientRect().width;
          probe.remove();
        }
        const range = document.createRange();
        const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
        let shown = 0;
        for (let node = walker.nextNode(); node; node = walker.nextNode()) {
          for (let i = 0; i < node.length; i++) {
            range.setStart(node, i);
            range.setEnd(node, i + 1);
            const r = range.getBoundingClientRect();
            if (r.width > 0 && r.left >= left - 0.5 && r.right <= right + 0.5) shown++;
          }
        }
        return shown;
        """,
        element,
    )
