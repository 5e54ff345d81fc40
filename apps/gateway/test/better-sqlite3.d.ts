// The probes only open a file read-only and run selects; @types/better-sqlite3 is not installed.
declare module "better-sqlite3" {
  namespace Database {
    interface Statement {
      all(...params: unknown[]): unknown[];
      get(...params: unknown[]): unknown;
    }
    interface Database {
      prepare(sql: string): Statement;
      close(): void;
    }
  }
  const Database: new (filename: string, options?: { readonly?: boolean; fileMustExist?: boolean }) => Database.Database;
  export default Database;
}
