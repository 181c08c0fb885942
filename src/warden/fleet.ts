/**
 * The nodes that share this node's state, as the console's overview lists them: on PostgreSQL the
 * fleet's live nodes (backends/postgres/node-registry.ts, live = owner lock held); on the
 * embedded backend this node alone, since only one process can hold its home.
 */
import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import type { FleetNodeRecord, NodeAnnouncement } from "../backends/postgres/node-registry.js";

export type { NodeAnnouncement } from "../backends/postgres/node-registry.js";

export interface FleetNode extends FleetNodeRecord {
  /** the node that answered */
  readonly self: boolean;
}

export interface FleetView {
  /** true on a shared database (a fleet), false on the embedded backend (a single node) */
  readonly shared: boolean;
  readonly nodes: readonly FleetNode[];
}

/** What a shared backend offers: its registry, and this process's current owner id. */
export interface SharedNodes {
  readonly registry: { announce(announcement: NodeAnnouncement): Promise<void>; live(): Promise<FleetNodeRecord[]> };
  readonly selfId: () => string;
}

export class Fleet {
  readonly #shared: SharedNodes | undefined;
  /** the embedded node's own record: one process, one incarnation */
  readonly #alone = { node_id: randomUUID(), host: hostname(), pid: process.pid, started_at: Date.now() };
  #announced: NodeAnnouncement = {};

  constructor(shared: SharedNodes | undefined) {
    this.#shared = shared;
  }

  /** Says what this node is once it serves (its version and URL). */
  async announce(announcement: NodeAnnouncement): Promise<void> {
    this.#announced = { ...this.#announced, ...announcement };
    await this.#shared?.registry.announce(announcement);
  }

  async view(): Promise<FleetView> {
    if (this.#shared === undefined) return { shared: false, nodes: [{ ...this.#alone, ...this.#announced, self: true }] };
    const self = this.#shared.selfId();
    return { shared: true, nodes: (await this.#shared.registry.live()).map((node) => ({ ...node, self: node.node_id === self })) };
  }
}
