// A display formula that scrolls sideways on a narrow screen can be scrolled with the keyboard: it gets a
// tab stop while it is wider than its box (site.css draws the cue). The theme does the same for code blocks,
// cell outputs and tables (300 ms after a resize); MathJax's formulas are typeset later, so they are done here.
(() => {
  const BOXES = '.bd-article mjx-container[display="true"]';
  const update = () => {
    document.querySelectorAll(BOXES).forEach((box) => {
      if (box.scrollWidth > box.clientWidth + 1) box.setAttribute("tabindex", "0");
      else if (box.getAttribute("tabindex") === "0") box.removeAttribute("tabindex");
    });
  };
  const start = () => {
    update();
    window.addEventListener("resize", update);
    // display formulas get their width once MathJax has typeset them
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) MathJax.startup.promise.then(update);
  };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
