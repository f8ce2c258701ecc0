// Draw every explorer on the page (see _ext/explorers.py): each .book-explorer block holds its Vega-Lite
// specification in a JSON script tag; vega-embed draws it as SVG, with the same options as in JupyterLab.
// Three things only the website does (site.css places the controls above the chart):
// - the chart follows the page's colour scheme, and is drawn again, keeping its controls' settings, when the
//   reader switches between light and dark;
// - on a screen wider than the chart needs, the chart is drawn larger, so that its 12-px text reads at the
//   page's 16 px (the marks are SVG: they stay sharp, and a click still finds its mark);
// - a block says when it is drawn (data-ready) or why it is not (data-error), for the tests and for readers.
(() => {
  const TEXT_SCALE = 16 / 12;  // the page's text over the explorers' usual text
  const LIGHT = { background: "transparent" };
  const DARK = {
    background: "transparent",
    title: { color: "#e8e8e8", subtitleColor: "#e8e8e8" },
    text: { color: "#e8e8e8" },
    axis: { domainColor: "#b0b0b0", tickColor: "#b0b0b0", gridColor: "#4a4a4a", labelColor: "#e0e0e0",
            titleColor: "#e8e8e8" },
    legend: { labelColor: "#e0e0e0", titleColor: "#e8e8e8" },
    view: { stroke: "#6a6a6a" },
    style: {
      ink: { stroke: "#e8e8e8", fill: "#e8e8e8" },  // attn_helpers.explorers._explorer.INK
      // the guides' styles are set in _explorer.py too, for JupyterLab's dark theme
      "guide-label": { fill: "#e0e0e0" }, "guide-title": { fill: "#e8e8e8" },
      // attn_helpers.explorers._tiles.PALE: a veil of the dark page's colour, lighter than white's on light pages,
      // so that blocked scores stay visible but dimmer than the others.
      pale: { color: "#14181e", fill: "#14181e", opacity: 0.45 },
    },
  };
  const isDark = () => document.documentElement.dataset.theme === "dark";
  // The spec's own config wins over vega-embed's: the page's colours are merged into it instead.
  const merged = (into, from) => {
    const out = { ...into };
    for (const [key, value] of Object.entries(from)) {
      out[key] = value && typeof value === "object" && !Array.isArray(value) ? merged(into[key] || {}, value) : value;
    }
    return out;
  };

  function fit(block) {
    const svg = block.querySelector(".book-explorer-view svg");
    if (!svg) return;
    const width = Number(svg.getAttribute("width")), height = Number(svg.getAttribute("height"));
    const room = block.clientWidth;
    const scale = Math.max(1, Math.min(TEXT_SCALE, room / width));
    svg.style.width = `${width * scale}px`;
    svg.style.height = `${height * scale}px`;
  }

  async function draw(block) {
    const spec = JSON.parse(block.querySelector('script[type="application/json"]').textContent);
    const old = block.explorerView;
    const settings = {};
    if (old) {  // keep where the reader left the controls
      for (const param of spec.params || []) {
        if (param.bind) settings[param.name] = old.signal(param.name);
      }
      old.finalize();
      block.querySelector(".book-explorer-view").remove();
    }
    const view = document.createElement("div");
    view.className = "book-explorer-view";
    block.appendChild(view);
    const dark = isDark();
    spec.config = merged(spec.config || {}, dark ? DARK : LIGHT);
    // vega-embed's options, as JupyterLab gets them: attn_helpers.explorers._explorer.EMBED_OPTIONS, on the page.
    const result = await vegaEmbed(view, spec, JSON.parse(block.dataset.embedOptions));
    for (const [name, value] of Object.entries(settings)) result.view.signal(name, value);
    if (Object.keys(settings).length) await result.view.runAsync();
    block.explorerView = result.view;
    block.dataset.theme = dark ? "dark" : "light";
    fit(block);
  }

  function drawAll() {
    for (const block of document.querySelectorAll(".book-explorer")) {
      draw(block)
        .then(() => {
          block.querySelector(".book-explorer-fallback").hidden = true;
          block.dataset.ready = "true";
        })
        .catch((error) => {
          block.dataset.error = String(error);
          console.error("explorer:", error);
        });
    }
  }

  document.addEventListener("DOMContentLoaded", () => {
    drawAll();
    new MutationObserver(() => {
      for (const block of document.querySelectorAll(".book-explorer[data-ready]")) {
        if (block.dataset.theme !== (isDark() ? "dark" : "light")) {
          delete block.dataset.ready;
          draw(block).then(() => { block.dataset.ready = "true"; })
            .catch((error) => { block.dataset.error = String(error); });
        }
      }
    }).observe(document.documentElement, { attributes: true, attributeFilter: ["data-theme"] });
    window.addEventListener("resize", () => document.querySelectorAll(".book-explorer").forEach(fit));
  });
})();
