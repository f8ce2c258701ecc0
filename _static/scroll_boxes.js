// A display formula wider than its box scrolls sideways (site.css draws the cue), on a phone and, for the widest,
// on a desktop too. A keyboard user scrolls it once it has a tab stop, and a screen reader then names what has
// the focus: so while a formula is wider than its box it gets tabindex="0", the role of a group and a name,
// "Equation (8.3), scrolls sideways" (its number, when it has one). The theme gives tab stops to code blocks, cell
// outputs and tables (300 ms after a resize); MathJax typesets the formulas later, so they are done here, once
// MathJax has typeset them and again after every resize. tests/test_browser.py checks both widths.
(() => {
  const BOXES = '.bd-article mjx-container[display="true"]';
  const MARK = "data-scroll-box"; // set on the formulas this script changed, so that it undoes only its own
  const label = (box) => {
    const number = (box.closest("div.math")?.querySelector(".eqno")?.textContent || "").match(/\([\d.]+\)/);
    return `Equation${number ? " " + number[0] : ""}, scrolls sideways`;
  };
  const update = () => {
    document.querySelectorAll(BOXES).forEach((box) => {
      if (box.scrollWidth > box.clientWidth + 1) {
        box.setAttribute("tabindex", "0");
        box.setAttribute("role", "group");
        box.setAttribute("aria-label", label(box));
        box.setAttribute(MARK, "");
      } else if (box.hasAttribute(MARK)) {
        ["tabindex", "role", "aria-label", MARK].forEach((name) => box.removeAttribute(name));
      }
    });
  };
  // display formulas get their width once MathJax has typeset them (its script is deferred: ask when it is there)
  const afterMathJax = () => window.MathJax?.startup?.promise?.then(update);
  const start = () => {
    update();
    window.addEventListener("resize", update);
    afterMathJax();
    window.addEventListener("load", afterMathJax, {once: true});
  };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
