// The language switch on every page of both editions (English <-> 中文), built by tests/i18n.py:
// the English site is _build/html/, the Chinese one _build/html/zh_CN/, with the same page paths.
// The link goes to the SAME page in the other edition, computed from this page's own address and
// Sphinx's data-content_root, so it works from file:// and from a server at any prefix.
(function () {
  "use strict";
  var ZH = "zh_CN";
  // Theme strings the theme leaves English in the Chinese edition (tooltips and labels).
  var ZH_LABELS = {
    "Launch on Binder": "在 Binder 上运行",
    "Launch on Colab": "在 Colab 上运行",
    "Launch interactive content": "运行交互式内容",
    "Source repositories": "源码库",
    "Repository": "源码库",
    "Open issue": "创建议题",
    "列印成 PDF": "打印为 PDF",
    "Link to this heading": "链接到本标题",
    "Toggle hidden content": "显示或隐藏内容",
    "Toggle primary sidebar": "显示或隐藏左侧栏",
    "Toggle secondary sidebar": "显示或隐藏右侧栏",
    "Color mode": "颜色模式",
    "System Settings": "跟随系统",
    "Show code cell source": "显示代码",
    "Hide code cell source": "隐藏代码",
    "Show code cell outputs": "显示输出",
    "Hide code cell outputs": "隐藏输出",
    "Show code cell content": "显示代码单元",
    "Hide code cell content": "隐藏代码单元",
  };

  function otherEdition() {
    var html = document.documentElement;
    var isZh = (html.lang || "").toLowerCase().indexOf("zh") === 0;
    var root = new URL(html.getAttribute("data-content_root") || "./", window.location.href);
    var here = new URL(window.location.href);
    var page = here.href.slice(0, here.href.length - here.search.length - here.hash.length);
    var rel = page.indexOf(root.href) === 0 ? page.slice(root.href.length) : "index.html";
    var target = new URL((isZh ? "../" : ZH + "/") + rel + here.search + here.hash, root);
    return { isZh: isZh, href: target.href };
  }

  function translateTheme() {
    document.querySelectorAll("[title], [data-bs-original-title], [aria-label]").forEach(function (el) {
      ["title", "data-bs-original-title", "aria-label"].forEach(function (attr) {
        var v = el.getAttribute(attr);
        if (v && ZH_LABELS[v.trim()]) el.setAttribute(attr, ZH_LABELS[v.trim()]);
      });
    });
    var texts = ".btn__text-container, summary .admonition-title, .theme-switch-button + .dropdown-menu span";
    document.querySelectorAll(texts).forEach(function (el) {
      var v = el.textContent.trim();
      if (ZH_LABELS[v]) el.textContent = ZH_LABELS[v];
    });
  }

  function init() {
    var other = otherEdition();
    var a = document.createElement("a");
    a.className = "btn btn-sm lang-switch";
    a.href = other.href;
    a.textContent = other.isZh ? "English" : "中文";
    a.setAttribute("hreflang", other.isZh ? "en" : "zh-CN");
    a.setAttribute("lang", other.isZh ? "en" : "zh-CN");
    a.title = other.isZh ? "Read this page in English" : "阅读本页的中文版";
    a.style.cssText = "font-size:0.95rem; font-weight:600; margin-right:0.5rem; white-space:nowrap;";
    var bar = document.querySelector(".article-header-buttons");
    if (bar) {
      bar.insertBefore(a, bar.firstChild);
    } else {
      a.style.cssText += "position:fixed; top:0.5rem; right:1rem; z-index:1000;";
      document.body.appendChild(a);
    }
    if (other.isZh) translateTheme();
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
