// Keeps a page current while a run goes on: polls the page's version and, when it changes, swaps in the new <main>
// (fetched from the same address, parsed without running anything in it). No reload, so scroll and open details stay.
(function () {
  "use strict";
  const meta = document.querySelector('meta[name="avo-version"]');
  if (!meta) return;
  const versionUrl = "/api/version?page=" + encodeURIComponent(location.pathname);
  let version = meta.content;
  async function tick() {
    try {
      const answer = await fetch(versionUrl, { cache: "no-store" });
      if (answer.ok) {
        const now = (await answer.json()).version;
        if (now !== version) {
          const page = await fetch(location.href, { cache: "no-store" });
          if (page.ok) {
            const doc = new DOMParser().parseFromString(await page.text(), "text/html");
            const fresh = doc.querySelector("main");
            const open = new Set([...document.querySelectorAll("details[open] summary")].map((s) => s.textContent));
            if (fresh) {
              fresh.querySelectorAll("details summary").forEach((s) => {
                if (open.has(s.textContent)) s.parentElement.open = true;
              });
              document.querySelector("main").replaceWith(document.adoptNode(fresh));
              version = now;
              document.body.dataset.refreshed = String(Number(document.body.dataset.refreshed || 0) + 1);
            }
          }
        }
      }
    } catch (err) {
      // the server went away or is restarting: keep trying
    }
    setTimeout(tick, 1000);
  }
  setTimeout(tick, 1000);
})();
