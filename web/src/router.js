import { createRouter, createWebHistory } from 'vue-router';
import { session, restore, logout, onUnauthorized } from './store.js';
import { stopEvents } from './events.js';
import Shell from './components/Shell.vue';
import Login from './pages/Login.vue';

export const routes = [
  { path: '/login', name: 'login', component: Login, meta: { public: true } },
  {
    path: '/',
    component: Shell,
    children: [
      { path: '', redirect: '/overview' },
      { path: 'overview', name: 'overview', component: () => import('./pages/Overview.vue'), meta: { title: 'nav.overview' } },
      { path: 'plugins', name: 'plugins', component: () => import('./pages/Plugins.vue'), meta: { title: 'nav.plugins' } },
      { path: 'config', name: 'config', component: () => import('./pages/Config.vue'), meta: { title: 'nav.config' } },
      { path: 'inference', name: 'inference', component: () => import('./pages/Inference.vue'), meta: { title: 'nav.inference' } },
      { path: 'nodes', name: 'nodes', component: () => import('./pages/Nodes.vue'), meta: { title: 'nav.nodes' } },
      { path: 'tasks', name: 'tasks', component: () => import('./pages/Tasks.vue'), meta: { title: 'nav.tasks' } },
      { path: 'jobs', name: 'jobs', component: () => import('./pages/Jobs.vue'), meta: { title: 'nav.jobs' } },
      { path: 'queues', name: 'queues', component: () => import('./pages/Queues.vue'), meta: { title: 'nav.queues' } },
      { path: 'tasks/:id', name: 'task', component: () => import('./pages/TaskDetail.vue'), meta: { title: 'nav.tasks' } },
      { path: ':pathMatch(.*)*', name: 'notfound', component: () => import('./pages/NotFound.vue') },
    ],
  },
];

export const router = createRouter({ history: createWebHistory('/'), routes });

router.beforeEach(async (to) => {
  if (to.meta.public) return true;
  if (!session.token) return { path: '/login', query: to.fullPath !== '/overview' && to.fullPath !== '/' ? { redirect: to.fullPath } : {} };
  try {
    await restore();
  } catch (e) {
    if (e.status === 401 || !session.token) return { path: '/login', query: { redirect: to.fullPath } };
    // The server is unreachable: show the page; its own error state says so.
  }
  return true;
});

// A 401 anywhere (token revoked or expired) ends the session.
onUnauthorized(() => {
  logout();
  stopEvents();
  const cur = router.currentRoute.value;
  if (!cur.meta.public) router.replace({ path: '/login', query: { redirect: cur.fullPath, expired: '1' } });
});
