// topology_draw_render: draguard's pictures as a browser shows them. For three exports (the
// 16-GPU NVSwitch DGX-2H, the 8-GPU g4dn with its EFA NIC, the POWER8 Minsky with GPU pairs and
// GPU-CPU NVLinks; `topology draw`) and two placements (`convert --draw`: rails converted on the
// XE8640-like node, an NVLink pair refused on the g4dn), headless Chromium renders the SVG to PNG
// twice: at its own size (the picture must fill the page, not be blank) and scaled into a
// 640-pixel-wide <img> on a grey page (the picture's rectangle must keep the SVG's aspect ratio).
// The PNGs are decoded here (zlib, PNG filters) and measured pixel by pixel.
//
// Usage: node draw_render_test.mjs --bin DRAGUARD --chromium CHROMIUM --data TESTDATA [--keep DIR]
// (--keep copies the natural-size PNGs to DIR/<name>.png: docs/img).
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import zlib from "node:zlib";

import { checks } from "../../tools/checks.mjs";

const argv = process.argv.slice(2);
const opt = (name, required = true) => {
  const i = argv.indexOf(name);
  if (i < 0 || i + 1 >= argv.length) {
    if (required) throw new Error(`missing ${name}`);
    return "";
  }
  return argv[i + 1];
};
const BIN = opt("--bin");
const CHROMIUM = opt("--chromium");
const DATA = opt("--data");
const KEEP = opt("--keep", false);

const G4DN = "hwloc/aws_g4dn-metal_2s-8259CL_8xT4_cuda-nvml-opencl_efa.xml";
const XE8640 = "hwloc-synthetic/xe8640-like_4xH100-SXM_4numa_nvlink-all_3xmlx5.xml";
// A Pod asking for two GPUs with `annotations` (draguard.io/...), as `convert --draw` input.
const pod = (name, annotations) => `apiVersion: v1\nkind: Pod\nmetadata: {name: ${name}, namespace: ml, ` +
  `annotations: {${annotations}}}\nspec:\n  containers:\n  - {name: c, image: x, resources: {limits: {nvidia.com/gpu: 2}}}\n`;
// The pictures: name (the PNG is docs/img/<name>.png), the draguard arguments that draw it into
// DIR, and the file they write there.
const PICTURES = [
  ["topology-dgx2h", "hwloc/hwloc_nvidia-dgx2h_2s-xeon8174_16xV100-SXM3_12xNVSwitch_nvlink-hetero.xml"],
  ["topology-g4dn", G4DN],
  ["topology-minsky", "hwloc/hwloc_ibm-power8-minsky_2s_4xP100-SXM2_nvlink-gpu-cpu-hetero.xml"],
].map(([name, rel]) => ({ name, args: (dir) => ["topology", "draw", "-f", path.join(DATA, rel), "-o", path.join(dir, "out.svg")],
  file: "out.svg" })).concat([
  // Rails (two GPUs, each with an RDMA NIC under its root) on the XE8640-like node: converted.
  { name: "placement-rails-xe8640", input: pod("rails", '"draguard.io/nic": rdma'), file: "pod-rails-xe8640.svg",
    args: (dir) => ["convert", "-f", path.join(dir, "in.yaml"), "--topology-dir", path.join(dir, "topo"), "--draw", dir] },
  // Two NVLink-connected GPUs on the g4dn, which has no NVLink: refused, the nearest miss outlined.
  { name: "placement-refused-g4dn", input: pod("nvlink", '"draguard.io/interconnect": nvlink'), file: "pod-nvlink-g4dn.svg",
    args: (dir) => ["convert", "-f", path.join(dir, "in.yaml"), "--topology-dir", path.join(dir, "topo"), "--draw", dir] },
]);
const TOPOLOGY = { "placement-rails-xe8640": [XE8640, "xe8640.xml"], "placement-refused-g4dn": [G4DN, "g4dn.xml"] };
const SCALED_WIDTH = 640;
const MARGIN = 24;
const GREY = [128, 128, 128];

const { check, assert, finish } = checks("topology_draw_render");

// Decodes an 8-bit RGB or RGBA, non-interlaced PNG into {width, height, channels, pixels}.
function decodePng(buf) {
  assert(buf.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])), "not a PNG");
  let off = 8;
  let width = 0, height = 0, depth = 0, type = 0, interlace = 0;
  const idat = [];
  while (off < buf.length) {
    const len = buf.readUInt32BE(off);
    const kind = buf.toString("latin1", off + 4, off + 8);
    const data = buf.subarray(off + 8, off + 8 + len);
    if (kind === "IHDR") {
      width = data.readUInt32BE(0);
      height = data.readUInt32BE(4);
      depth = data[8];
      type = data[9];
      interlace = data[12];
    } else if (kind === "IDAT") {
      idat.push(data);
    } else if (kind === "IEND") {
      break;
    }
    off += 12 + len;
  }
  assert(depth === 8 && (type === 2 || type === 6) && interlace === 0, `unsupported PNG (depth ${depth}, type ${type})`);
  const channels = type === 6 ? 4 : 3;
  const raw = zlib.inflateSync(Buffer.concat(idat));
  const stride = width * channels;
  const pixels = Buffer.alloc(stride * height);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)];
    const line = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    for (let x = 0; x < stride; x++) {
      const a = x >= channels ? pixels[y * stride + x - channels] : 0;
      const b = y > 0 ? pixels[(y - 1) * stride + x] : 0;
      const c = x >= channels && y > 0 ? pixels[(y - 1) * stride + x - channels] : 0;
      let v = line[x];
      if (filter === 1) v += a;
      else if (filter === 2) v += b;
      else if (filter === 3) v += (a + b) >> 1;
      else if (filter === 4) {
        const p = a + b - c, pa = Math.abs(p - a), pb = Math.abs(p - b), pc = Math.abs(p - c);
        v += pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
      } else assert(filter === 0, `bad filter ${filter}`);
      pixels[y * stride + x] = v & 0xff;
    }
  }
  return { width, height, channels, pixels };
}

const rgb = (img, x, y) => {
  const i = (y * img.width + x) * img.channels;
  return [img.pixels[i], img.pixels[i + 1], img.pixels[i + 2]];
};
const same = (p, q) => p[0] === q[0] && p[1] === q[1] && p[2] === q[2];
const WHITE = [255, 255, 255];

// The bounding box {x0, y0, x1, y1, w, h} of the pixels `keep(rgb, x, y)` accepts, or null.
function bbox(img, keep) {
  let x0 = img.width, y0 = img.height, x1 = -1, y1 = -1;
  for (let y = 0; y < img.height; y++) {
    for (let x = 0; x < img.width; x++) {
      if (!keep(rgb(img, x, y), x, y)) continue;
      x0 = Math.min(x0, x); x1 = Math.max(x1, x);
      y0 = Math.min(y0, y); y1 = Math.max(y1, y);
    }
  }
  return x1 < 0 ? null : { x0, y0, x1, y1, w: x1 - x0 + 1, h: y1 - y0 + 1 };
}

// Runs headless Chromium on `page`, a screenshot of a window of w x h pixels.
function screenshot(page, png, w, h, profile) {
  const r = spawnSync(CHROMIUM, ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
    "--disable-dev-shm-usage", "--force-device-scale-factor=1", `--user-data-dir=${profile}`, `--window-size=${w},${h}`,
    `--screenshot=${png}`, `file://${page}`], { encoding: "utf8", timeout: 90000 });
  assert(fs.existsSync(png), `chromium wrote no screenshot (status ${r.status}, signal ${r.signal}): ${(r.stderr || "").slice(-600)}`);
  return decodePng(fs.readFileSync(png));
}

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "draguard-draw-render-"));
try {
  for (const pic of PICTURES) {
    const name = pic.name;
    const dir = path.join(tmp, name);
    fs.mkdirSync(path.join(dir, "topo"), { recursive: true });
    if (pic.input) fs.writeFileSync(path.join(dir, "in.yaml"), pic.input);
    if (TOPOLOGY[name]) fs.copyFileSync(path.join(DATA, TOPOLOGY[name][0]), path.join(dir, "topo", TOPOLOGY[name][1]));
    const svgPath = path.join(dir, pic.file);
    const draw = spawnSync(BIN, pic.args(dir), { encoding: "utf8" });
    check(`${name}: draguard ${pic.args(dir)[0]} writes ${pic.file}`, () =>
      assert(fs.existsSync(svgPath), `exit ${draw.status}${draw.error ? ` (${draw.error.message})` : ""}: ${draw.stderr}`));
    if (!fs.existsSync(svgPath)) continue;
    const svg = fs.readFileSync(svgPath, "utf8");
    const m = /<svg [^>]*width="(\d+)" height="(\d+)" viewBox="0 0 (\d+) (\d+)"/.exec(svg);
    check(`${name}: the SVG states its size and viewBox`, () => assert(m && m[1] === m[3] && m[2] === m[4], svg.slice(0, 300)));
    if (!m) continue;
    const W = Number(m[1]), H = Number(m[2]);

    // At its own size: the picture fills the window and shows something.
    const natural = path.join(dir, `${name}.png`);
    let img;
    check(`${name}: rendered at ${W}x${H}, not blank`, () => {
      img = screenshot(svgPath, natural, W, H, path.join(tmp, "profile"));
      assert(img.width === W && img.height === H, `PNG is ${img.width}x${img.height}`);
      const white = [255, 255, 255];
      let ink = 0;
      const colours = new Set();
      for (let y = 0; y < H; y++) {
        for (let x = 0; x < W; x++) {
          const p = rgb(img, x, y);
          if (!same(p, white)) ink++;
          colours.add((p[0] << 16) | (p[1] << 8) | p[2]);
        }
      }
      const share = ink / (W * H);
      assert(share > 0.05, `only ${(100 * share).toFixed(2)}% of the pixels are not white`);
      assert(colours.size >= 8, `only ${colours.size} colours`);
      // The machine box's frame: its left edge runs through x = 8 (anti-aliased to grey).
      const edge = rgb(img, 8, 40);
      assert(edge[0] < 160 && edge[1] < 160 && edge[2] < 160, `no frame at (8, 40): ${edge}`);
      console.log(`     ${name}: ${W}x${H}, ${(100 * share).toFixed(1)}% ink, ${colours.size} colours, SVG ${svg.length} bytes`);
    });
    if (KEEP && img) {
      fs.mkdirSync(KEEP, { recursive: true });
      fs.copyFileSync(natural, path.join(KEEP, `${name}.png`));
    }

    // Scaled into a 640-pixel-wide <img> on a grey page: the picture keeps its aspect ratio.
    const page = path.join(dir, `${name}.html`);
    fs.writeFileSync(page, `<!DOCTYPE html><html><body style="margin:${MARGIN}px;background:rgb(${GREY})">` +
      `<img src="${pic.file}" style="display:block;width:${SCALED_WIDTH}px;height:auto"></body></html>`);
    const winH = Math.ceil((SCALED_WIDTH * H) / W) + 2 * MARGIN;
    check(`${name}: scaled to ${SCALED_WIDTH} px wide, aspect kept`, () => {
      const s = screenshot(page, path.join(dir, `${name}-scaled.png`), SCALED_WIDTH + 2 * MARGIN, winH, path.join(tmp, "profile"));
      const frame = bbox(s, (p) => !same(p, GREY));
      assert(frame !== null, "nothing but the grey page");
      assert(Math.abs(frame.w - SCALED_WIDTH) <= 1, `picture ${frame.w} px wide, not ${SCALED_WIDTH}`);
      const want = (SCALED_WIDTH * H) / W;
      assert(Math.abs(frame.h - want) <= 1.5, `picture ${frame.w}x${frame.h}, want ${SCALED_WIDTH}x${want.toFixed(1)} (SVG ${W}x${H})`);
      // What is drawn inside scales evenly: the ink's bounding box has the natural render's shape.
      // (2 px inside the picture's edge, where the page's grey blends in.)
      const ink = bbox(s, (p, x, y) => x > frame.x0 + 1 && x < frame.x1 - 1 && y > frame.y0 + 1 && y < frame.y1 - 1 &&
        p[0] + p[1] + p[2] < 3 * 250);
      const natInk = img ? bbox(img, (p) => p[0] + p[1] + p[2] < 3 * 250) : null;
      assert(ink !== null && natInk !== null, "no ink");
      const ratio = ink.w / ink.h, natRatio = natInk.w / natInk.h;
      assert(Math.abs(ratio / natRatio - 1) < 0.02, `ink ${ink.w}x${ink.h} scaled, ${natInk.w}x${natInk.h} natural`);
    });
  }
} finally {
  fs.rmSync(tmp, { recursive: true, force: true });
}
finish();
