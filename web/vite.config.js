import { defineConfig } from 'vite';
import vue from '@vitejs/plugin-vue';

// The dev server proxies the API to a running `heteroflow server`
// (HF_API, default http://127.0.0.1:3333); the production build is served by
// the server itself (--ui-dir), so asset paths are absolute from "/".
const api = process.env.HF_API || 'http://127.0.0.1:3333';

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
    chunkSizeWarningLimit: 2000,
    rollupOptions: {
      output: {
        manualChunks: {
          vue: ['vue', 'vue-router', 'vue-i18n'],
          'element-plus': ['element-plus', '@element-plus/icons-vue'],
        },
      },
    },
  },
  test: {
    include: ['src/**/*.test.js'],
    environment: 'node',
  },
});
