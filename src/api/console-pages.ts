/**
 * What the console's Invocations page asks the API for, shared by the page and the node: the node
 * names that same request in the page's HTML (`<link rel="preload" as="fetch">`), so the browser
 * fetches the first page of rows while it still loads the script, instead of after running it.
 * The two must build the same URL (the preload is used only on an exact match), hence one function.
 */

/** Rows per page of the Invocations page. */
export const INVOCATIONS_PAGE_ROWS = 50;

/** The statuses the Invocations page filters by. */
export const INVOCATION_LIST_STATUSES = ["in_progress", "awaiting_approval", "unresolved", "recorded", "reconciled"] as const;
export type InvocationListStatus = (typeof INVOCATION_LIST_STATUSES)[number];

/** The status a page's `?status=` names, when it is one. */
export function invocationListStatus(raw: string | null | undefined): InvocationListStatus | undefined {
  return (INVOCATION_LIST_STATUSES as readonly string[]).includes(raw ?? "") ? (raw as InvocationListStatus) : undefined;
}

/** The query of one page of the listing, in the order the client writes its parameters. */
export function invocationsPageQuery(status: InvocationListStatus | undefined, cursor: string | undefined): { limit: number; status?: InvocationListStatus; cursor?: string } {
  return { limit: INVOCATIONS_PAGE_ROWS, ...(status === undefined ? {} : { status }), ...(cursor === undefined ? {} : { cursor }) };
}
