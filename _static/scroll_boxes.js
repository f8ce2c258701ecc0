// A box that scrolls sideways (a long display equation, a wide table) on a narrow screen can be scrolled
// with the keyboard: it gets a tab stop while its content is wider than it (site.css draws the cue).
(() => {
  const BOXES = '.bd-article mjx-container[display="true"], .bd-article .cell_output .output.text_html';
  const update = () => {
    document.querySelectorAll(BOXES).forEach((box) => {
      if (box.scrollWidth > box.clientWidth + 1) box.setAttribute("tabindex", "0");
      else if (box.getAttribute("tabindex") === "0") box.removeAttribute("tabindex");
    });
  };
  const start = () => {
    update();
    window.addEventListener("resize", update);
    // display equations get their width once MathJax has typeset them
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) MathJax.startup.promise.then(update);
  };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
