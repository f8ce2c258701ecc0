// Search results: Sphinx shows under each hit a snippet of the page's text, which it takes from the page's
// HTML, where a formula is still its TeX source ("\(d^{1/4}\)") until MathJax typesets it. On the search
// page this turns each formula into plain text ("softmax(QKᵀ/√d) V", "d^1/4") before the snippet is cut.
// Other pages: nothing.
(() => {
  const SYMBOLS = {
    cdot: "·", times: "×", sqrt: "√", top: "ᵀ", infty: "∞", le: "≤", leq: "≤", ge: "≥", geq: "≥",
    approx: "≈", neq: "≠", in: "∈", to: "→", rightarrow: "→", ldots: "…", cdots: "⋯", dots: "…",
    sum: "Σ", prod: "Π", alpha: "α", beta: "β", gamma: "γ", delta: "δ", epsilon: "ε", theta: "θ",
    lambda: "λ", mu: "μ", pi: "π", sigma: "σ", tau: "τ", phi: "φ", Sigma: "Σ", Delta: "Δ",
    mathbb: "", mathbf: "", mathrm: "", mathcal: "", operatorname: "", text: "", textrm: "",
    left: "", right: "", big: "", Big: "", quad: " ", qquad: " ", displaystyle: "",
  };
  const group = (x) => (/^[\w√ᵀ^]+$/.test(x.trim()) ? x.trim() : `(${x.trim()})`);
  const readable = (tex) => {
    let s = tex
      .replace(/^\s*(\\\(|\\\[|\$\$?)|(\\\)|\\\]|\$\$?)\s*$/g, "")   // the delimiters
      .replace(/\^\s*(\\top\b|\{\\top\})/g, "ᵀ")
      .replace(/\\!/g, "")
      .replace(/\\[,;: ]/g, " ");
    for (let i = 0; i < 4; i++) {  // innermost first: \frac{QK^\top}{\sqrt{d}} -> QKᵀ/√d
      s = s
        .replace(/\\sqrt\s*\{([^{}]*)\}/g, (m, x) => "√" + group(x))
        .replace(/\\frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}/g, (m, a, b) => `${group(a)}/${group(b)}`)
        .replace(/\\(?:text|textrm|mathrm|mathbf|mathit|mathcal|mathbb|operatorname)\s*\{([^{}]*)\}/g, "$1");
    }
    return s
      .replace(/\\([A-Za-z]+)/g, (m, name) => (Object.hasOwn(SYMBOLS, name) ? SYMBOLS[name] : name))
      .replace(/[{}]/g, "")
      .replace(/\s+/g, " ")
      .trim();
  };

  const patch = () => {
    if (typeof Search === "undefined" || Search.htmlToTextWithTeX) return;  // not the search page
    Search.htmlToTextWithTeX = Search.htmlToText;
    Search.htmlToText = (htmlString, anchor) => {
      const doc = new DOMParser().parseFromString(htmlString, "text/html");
      doc.querySelectorAll(".math").forEach((el) => { el.textContent = readable(el.textContent); });
      return Search.htmlToTextWithTeX(doc.documentElement.outerHTML, anchor);
    };
  };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", patch);
  else patch();
})();
