import { defineConfig } from 'vite';
import vue from '@vitejs/plugin-vue';

// The dev server proxies the API to a running `heteroflow server`
// (HF_API, default http://127.0.0.1:3333); the production build is served by
// the server itself (--ui-dir), so asset paths are absolute from "/".
const api = process.env.HF_API || 'http://127.0.0.1:3333';

// Libraries go in chunks of their own, so a release of the app's code leaves
// them cached: Vue with its router and i18n; ECharts (loaded with the
// inference page only); and Element Plus with the packages it is built on.
// A function, not a list of entry modules: a listed entry keeps every export
// of the library, and only the components the app imports should be built in.
function chunkOf(id) {
  const m = id.match(/\/node_modules\/((?:@[^/]+\/)?[^/]+)\//);
  if (!m) return undefined;
  const pkg = m[1];
  if (/^(vue|vue-router|vue-i18n|@vue\/.+|@intlify\/.+)$/.test(pkg)) return 'vue';
  if (/^(echarts|zrender|tslib)$/.test(pkg)) return 'echarts';
  return 'element-plus';
}

export default defineConfig({
  base: '/',
  plugins: [vue()],
  server: {
    port: Number(process.env.HF_UI_PORT || 5173),
    proxy: {
      '/api': { target: api, changeOrigin: false },
      '/livez': { target: api },
      '/readyz': { target: api },
    },
  },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    rollupOptions: {
      output: { manualChunks: chunkOf },
    },
  },
  test: {
    include: ['src/**/*.test.js'],
    environment: 'node',
    // Element Plus's per-component style entries import .css files: let Vite
    // take them (and drop the CSS) instead of Node.
    server: { deps: { inline: [/element-plus\/es\/components\/[^/]+\/style\//] } },
  },
});
