import { createApp } from 'vue';
import ElementPlus from 'element-plus';
import 'element-plus/dist/index.css';
import App from './App.vue';
import { router } from './router.js';
import { i18n } from './i18n/index.js';
import './styles.css';

createApp(App).use(i18n).use(ElementPlus).use(router).mount('#app');
