/** The dashboard's build (build.mjs), for the gateway's TypeScript that calls it. */
export declare const DIST: string;
export declare function buildDashboard(options?: { dist?: string }): Promise<{ dist: string; script: string; style: string }>;
