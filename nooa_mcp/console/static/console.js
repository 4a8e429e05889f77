// nooa-mcp console: small enhancements; every page reads fine without this file.
"use strict";

// "/" focuses the search box from anywhere but a text field.
document.addEventListener("keydown", (event) => {
  const tag = (event.target.tagName || "").toLowerCase();
  if (event.key !== "/" || ["input", "textarea", "select"].includes(tag)) return;
  const box = document.getElementById("q");
  if (box) { event.preventDefault(); box.focus(); box.select(); }
});

// "why not #1?": fetch the answer into the row when it is opened.
for (const details of document.querySelectorAll("details[data-src]")) {
  details.addEventListener("toggle", async () => {
    if (!details.open || details.dataset.loaded) return;
    details.dataset.loaded = "1";
    const body = details.querySelector(".why-body");
    try {
      const response = await fetch(details.dataset.src, { headers: { accept: "text/html" } });
      const html = await response.text();
      const doc = new DOMParser().parseFromString(html, "text/html");
      const answer = doc.querySelector(".whynot") || doc.querySelector(".error");
      if (answer) body.replaceChildren(document.importNode(answer, true));
    } catch (err) {
      body.append(" (could not load: " + err + ")");
    }
  });
}

// A reflection pass: follow its progress by server-sent events, then show the report.
const run = document.getElementById("run");
if (run && run.dataset.status === "running") {
  const source = new EventSource(run.dataset.events);
  const show = (state) => {
    const bar = document.getElementById("run-progress");
    bar.max = Math.max(state.total, 1);
    bar.value = state.done;
    document.getElementById("run-status").textContent = state.status;
    document.getElementById("run-count").textContent = state.done + " / " + state.total;
    document.getElementById("run-message").textContent = state.message;
    run.dataset.status = state.status;
    run.dataset.done = state.done;
    // Kept across the reload at the end, so the report page can say it was followed live.
    const key = "nooa-run-" + run.dataset.run;
    sessionStorage.setItem(key, String(Number(sessionStorage.getItem(key) || 0) + 1));
  };
  source.addEventListener("progress", (e) => show(JSON.parse(e.data)));
  source.addEventListener("end", (e) => { show(JSON.parse(e.data)); source.close(); window.location.reload(); });
}
