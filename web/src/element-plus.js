// Element Plus, only the parts this UI uses: each component registered by
// its tag name (templates keep writing <el-table>), the v-loading directive,
// the message and message-box services, and the CSS of exactly these (each
// component's style entry brings the styles of the components it is built
// from: a select's tags and scrollbar, a dialog's overlay).
//
// Each comes from its own entry (element-plus/es/components/NAME), never from
// 'element-plus' itself: that module builds the installer of the whole
// library when it loads, so importing even one name from it puts every
// component in the bundle. The rest of the app imports the services it calls
// (ElMessage, ElMessageBox, ElProgress) from here for the same reason.
//
// A component used in a template but missing here renders as an unknown
// element; element-plus.test.js fails when a .vue file uses one.
import { ElAlert } from 'element-plus/es/components/alert/index.mjs';
import { ElButton } from 'element-plus/es/components/button/index.mjs';
import { ElCard } from 'element-plus/es/components/card/index.mjs';
import { ElCheckbox } from 'element-plus/es/components/checkbox/index.mjs';
import { ElConfigProvider } from 'element-plus/es/components/config-provider/index.mjs';
import { ElDialog } from 'element-plus/es/components/dialog/index.mjs';
import { ElDrawer } from 'element-plus/es/components/drawer/index.mjs';
import { ElEmpty } from 'element-plus/es/components/empty/index.mjs';
import { ElForm, ElFormItem } from 'element-plus/es/components/form/index.mjs';
import { ElIcon } from 'element-plus/es/components/icon/index.mjs';
import { ElInput } from 'element-plus/es/components/input/index.mjs';
import { ElLoading } from 'element-plus/es/components/loading/index.mjs';
import { ElMessage } from 'element-plus/es/components/message/index.mjs';
import { ElMessageBox } from 'element-plus/es/components/message-box/index.mjs';
import { ElProgress } from 'element-plus/es/components/progress/index.mjs';
import { ElRadioButton, ElRadioGroup } from 'element-plus/es/components/radio/index.mjs';
import { ElResult } from 'element-plus/es/components/result/index.mjs';
import { ElOption, ElSelect } from 'element-plus/es/components/select/index.mjs';
import { ElSwitch } from 'element-plus/es/components/switch/index.mjs';
import { ElTable, ElTableColumn } from 'element-plus/es/components/table/index.mjs';
import { ElTag } from 'element-plus/es/components/tag/index.mjs';
import { ElTimeline, ElTimelineItem } from 'element-plus/es/components/timeline/index.mjs';
import { ElTooltip } from 'element-plus/es/components/tooltip/index.mjs';

import 'element-plus/es/components/alert/style/css';
import 'element-plus/es/components/button/style/css';
import 'element-plus/es/components/card/style/css';
import 'element-plus/es/components/checkbox/style/css';
import 'element-plus/es/components/config-provider/style/css';
import 'element-plus/es/components/dialog/style/css';
import 'element-plus/es/components/drawer/style/css';
import 'element-plus/es/components/empty/style/css';
import 'element-plus/es/components/form/style/css';
import 'element-plus/es/components/form-item/style/css';
import 'element-plus/es/components/icon/style/css';
import 'element-plus/es/components/input/style/css';
import 'element-plus/es/components/loading/style/css';
import 'element-plus/es/components/message/style/css';
import 'element-plus/es/components/message-box/style/css';
import 'element-plus/es/components/option/style/css';
import 'element-plus/es/components/progress/style/css';
import 'element-plus/es/components/radio/style/css';
import 'element-plus/es/components/radio-button/style/css';
import 'element-plus/es/components/radio-group/style/css';
import 'element-plus/es/components/result/style/css';
import 'element-plus/es/components/select/style/css';
import 'element-plus/es/components/switch/style/css';
import 'element-plus/es/components/table/style/css';
import 'element-plus/es/components/table-column/style/css';
import 'element-plus/es/components/tag/style/css';
import 'element-plus/es/components/timeline/style/css';
import 'element-plus/es/components/timeline-item/style/css';
import 'element-plus/es/components/tooltip/style/css';

/** The components templates use, by their registered names (ElTable is <el-table>). */
export const components = [
  ElAlert, ElButton, ElCard, ElCheckbox, ElConfigProvider, ElDialog, ElDrawer, ElEmpty, ElForm, ElFormItem, ElIcon,
  ElInput, ElOption, ElProgress, ElRadioButton, ElRadioGroup, ElResult, ElSelect, ElSwitch, ElTable, ElTableColumn,
  ElTag, ElTimeline, ElTimelineItem, ElTooltip,
];

export { ElMessage, ElMessageBox, ElProgress };

/** The Vue plugin: app.use(elementPlus). */
export default {
  install(app) {
    for (const c of components) app.component(c.name, c);
    app.use(ElLoading); // v-loading
    app.use(ElMessage);
    app.use(ElMessageBox);
  },
};
