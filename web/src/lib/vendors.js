// Accelerator vendors as the API names them (docs/ACCELERATORS.md): a
// device's vendor, the distinct vendors of a node and of the cluster, the
// vendor filter of the nodes page, and how a vendor is shown.

// The vendors the UI has a display name for (i18n `vendors.<name>`), in the
// order discovery numbers a node's devices. Any other vendor is shown as the
// API names it.
export const KNOWN_VENDORS = ['nvidia', 'amd', 'huawei', 'habana'];

// The server's rule for a vendor name: 1 to 32 of a-z, 0-9 and '-'.
const VENDOR_NAME = /^[a-z0-9-]{1,32}$/;

// A device's vendor; a device that names none is NVIDIA's, as the server
// reads a declared inventory.
export function gpuVendor(gpu) {
  return gpu && typeof gpu.vendor === 'string' && gpu.vendor ? gpu.vendor : 'nvidia';
}

// Distinct vendors, the known ones first in their order, then the others by name.
export function sortVendors(vendors) {
  const rank = (v) => {
    const i = KNOWN_VENDORS.indexOf(v);
    return i < 0 ? KNOWN_VENDORS.length : i;
  };
  return [...new Set(vendors)].sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0));
}

// The vendors of a node's devices; [] for a node without any.
export function nodeVendors(node) {
  return sortVendors(((node && node.gpus) || []).map(gpuVendor));
}

// The vendors of every node's devices.
export function clusterVendors(nodes) {
  return sortVendors((nodes || []).flatMap(nodeVendors));
}

// Whether a node has at least one device of `vendor`; every node does for ''.
export function hasVendor(node, vendor) {
  if (!vendor) return true;
  return ((node && node.gpus) || []).some((g) => gpuVendor(g) === vendor);
}

// The vendor filter from a URL query value: a valid vendor name, else ''.
export function vendorFromQuery(value) {
  const v = Array.isArray(value) ? value[0] : value;
  return typeof v === 'string' && VENDOR_NAME.test(v) ? v : '';
}

// The name shown for a vendor: its display name through `t` (vue-i18n's)
// for a known vendor, the API's name for any other.
export function vendorLabel(vendor, t) {
  return KNOWN_VENDORS.includes(vendor) ? t(`vendors.${vendor}`) : String(vendor ?? '');
}

// The Element Plus tag type of a vendor, so that each known vendor keeps
// one colour across the pages.
const TAG_TYPES = { nvidia: 'success', amd: 'danger', huawei: 'warning', habana: 'primary' };
export function vendorTagType(vendor) {
  return TAG_TYPES[vendor] || 'info';
}
