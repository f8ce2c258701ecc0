// Draw every explorer on the page (see _ext/explorers.py): each .book-explorer block holds its Vega-Lite
// specification in a JSON script tag; vega-embed draws it as SVG, with the same options as in JupyterLab.
document.addEventListener("DOMContentLoaded", () => {
  for (const block of document.querySelectorAll(".book-explorer")) {
    const spec = JSON.parse(block.querySelector('script[type="application/json"]').textContent);
    const view = document.createElement("div");
    view.className = "book-explorer-view";
    block.appendChild(view);
    vegaEmbed(view, spec, { renderer: "svg", actions: false })
      .then(() => {
        block.querySelector(".book-explorer-fallback").hidden = true;
        block.dataset.ready = "true";
      })
      .catch((error) => {
        block.dataset.error = String(error);
        console.error("explorer:", error);
      });
  }
});
