// fs-ext ships no typings; this declares the one function warden uses.
declare module "fs-ext" {
  export function flockSync(fd: number, flags: "ex" | "exnb" | "sh" | "shnb" | "un"): void;
  const fsExt: { flockSync: typeof flockSync };
  export default fsExt;
}
