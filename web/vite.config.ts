// The web UI is built into the Python package (src/hylo/server/web), which `hylo serve` serves at `/`.
// `make web` rebuilds it; CI rebuilds it with `npm ci` and fails when the committed bundle differs.
import { defineConfig } from "vite";
import react from "@vitejs/plugin-react";

export default defineConfig({
  plugins: [react()],
  base: "./",
  build: {
    outDir: "../src/hylo/server/web",
    emptyOutDir: true,
    sourcemap: false,
    chunkSizeWarningLimit: 1024,
  },
  server: {
    proxy: { "/api": { target: "http://127.0.0.1:8765", ws: true } },
  },
});
