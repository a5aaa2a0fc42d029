// The one HTML page of the console: it loads the bundle and holds nothing else (the app renders itself).
export function consoleIndexHtml(assetVersion: { js: string; css: string }): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>Hearth console</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/console/app.css?v=${encodeURIComponent(assetVersion.css)}">
</head>
<body>
<div id="app"></div>
<noscript>The Hearth console needs JavaScript. The API is documented at <a href="/docs">/docs</a>.</noscript>
<script type="module" src="/console/app.js?v=${encodeURIComponent(assetVersion.js)}"></script>
</body>
</html>
`;
}
