// The probes run selects, and a legacy producer's INSERT; @types/better-sqlite3 is not installed.
declare module "better-sqlite3" {
  namespace Database {
    interface Statement {
      all(...params: unknown[]): unknown[];
      get(...params: unknown[]): unknown;
      run(...params: unknown[]): { changes: number; lastInsertRowid: number | bigint };
    }
    interface Database {
      prepare(sql: string): Statement;
      close(): void;
    }
  }
  const Database: new (filename: string, options?: { readonly?: boolean; fileMustExist?: boolean }) => Database.Database;
  export default Database;
}
