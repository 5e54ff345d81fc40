import { createContext } from "preact";
import { useContext } from "preact/hooks";
import type { WhoAmI } from "./types.js";

/** Who the token is, for every page: it decides which buttons show. */
export const Session = createContext<WhoAmI | null>(null);
export const useSession = () => useContext(Session);
