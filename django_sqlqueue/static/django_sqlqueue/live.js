/* django-sqlqueue: the dashboard and the job list refresh themselves, every 5 seconds.

   The page's live control ([data-sq-live]) holds a Pause/Resume button; its state is kept in
   the browser (localStorage), so it holds for every page and tab of the admin. A page with a
   live region ([data-sq-live-region], the dashboard) fetches its own URL and swaps the region
   for the fresh one; a page without (the job list, whose rows Django's action script is bound
   to) reloads instead. Neither happens while updates are paused, the tab is hidden, a job is
   selected or an action chosen in the list, or a form field has the focus. No library, nothing
   fetched from elsewhere. Each period the control's data-sq-ticks counts one more, refreshed
   or not, and data-sq-refreshes counts the regions swapped. */
"use strict";
{
    const PAUSED = "django_sqlqueue.live";
    const PERIOD = "django_sqlqueue.live.seconds";

    const isPaused = () => localStorage.getItem(PAUSED) === "paused";

    function busy() {
        if (document.hidden) return true;
        if (document.querySelector("input.action-select:checked, #action-toggle:checked")) {
            return true;
        }
        const action = document.querySelector("#changelist-form select[name=action]");
        if (action && action.value) return true;
        // A field with the focus, but for the list's checkboxes (their state is checked above).
        const field = document.activeElement;
        const editing = "input:not(.action-select, #action-toggle), select, textarea, [contenteditable]";
        return Boolean(field && field.matches(editing));
    }

    async function swapRegions(regions) {
        const response = await fetch(window.location.href, {
            credentials: "same-origin",
            cache: "no-store",
            headers: {"X-Requested-With": "XMLHttpRequest"},
        });
        if (!response.ok || response.redirected) return false;
        const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
        const found = regions.map((region) => [
            region,
            fresh.querySelector(`[data-sq-live-region="${region.dataset.sqLiveRegion}"]`),
        ]);
        // A page that lost a region (logged out, an error page) changes nothing.
        if (found.some(([, replacement]) => !replacement) || isPaused() || busy()) return false;
        for (const [region, replacement] of found) {
            region.replaceWith(document.importNode(replacement, true));
        }
        return true;
    }

    function start(control) {
        const button = control.querySelector("button");
        const seconds = Number(localStorage.getItem(PERIOD)) || Number(control.dataset.sqLive) || 5;
        let ticks = 0;
        let refreshes = 0;

        const show = () => {
            const paused = isPaused();
            button.textContent = paused ? button.dataset.resume : button.dataset.pause;
            button.setAttribute("aria-pressed", paused ? "true" : "false");
            control.classList.toggle("sq-paused", paused);
        };
        button.addEventListener("click", () => {
            if (isPaused()) {
                localStorage.removeItem(PAUSED);
            } else {
                localStorage.setItem(PAUSED, "paused");
            }
            show();
        });
        window.addEventListener("storage", (event) => {
            if (event.key === PAUSED) show();
        });
        show();

        const tick = async () => {
            try {
                if (!isPaused() && !busy()) {
                    const regions = [...document.querySelectorAll("[data-sq-live-region]")];
                    if (!regions.length) {
                        window.location.reload();
                        return;
                    }
                    if (await swapRegions(regions)) {
                        refreshes += 1;
                        control.dataset.sqRefreshes = String(refreshes);
                    }
                }
            } catch (error) {
                // The server did not answer: try again next time.
            }
            ticks += 1;
            control.dataset.sqTicks = String(ticks);
            window.setTimeout(tick, seconds * 1000);
        };
        window.setTimeout(tick, seconds * 1000);
    }

    const control = document.querySelector("[data-sq-live]");
    if (control) start(control);
}
