/**
 * Bundle delivery: the manifest model and its validation, the bundle contract, compilation of a
 * directory, the store interfaces a backend implements, and the `Delivery` service over them.
 * Backends (src/backends/*) are not re-exported here: the domain never depends on them.
 */
export * from "./manifest-types.js";
export * from "./manifest.js";
export * from "./paths.js";
export * from "./contract/check.js";
export * from "./compile/directory.js";
export * from "./blob-store.js";
export * from "./stage.js";
export * from "./catalog.js";
export * from "./recovery.js";
export * from "./delivery-errors.js";
export * from "./chunk-upload.js";
export * from "./commit-verify.js";
export * from "./service.js";
export * from "./bundle-catalog.js";
export * from "./blob-reads.js";
