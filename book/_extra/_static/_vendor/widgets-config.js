// Loaded between require.js and the ipywidgets HTML manager (see nb_ipywidgets_js in _config.yml).
// The manager's bundle computes where its icon fonts live from the URL that require.js gives its
// module "@jupyter-widgets/html-manager/dist/libembed-amd": map that name to the vendored folder
// beside this file, so the fonts load from any page depth and with no CDN.
(function () {
  var here = document.currentScript.src.replace(/[^/]*$/, "");
  window.requirejs.config({
    paths: {
      "@jupyter-widgets/html-manager/dist": here + "html-manager",
    },
  });
})();
