// The signed-in key lives in sessionStorage only: gone when the tab closes, never sent anywhere but this origin.
const KEY = 'hearth.console.key';
const ENTITY = 'hearth.console.entity';

export interface Session {
  key: string;
  entity: string;
}

export function loadSession(): Session | null {
  const key = sessionStorage.getItem(KEY);
  const entity = sessionStorage.getItem(ENTITY);
  return key && entity ? { key, entity } : null;
}

export function saveSession(s: Session): void {
  sessionStorage.setItem(KEY, s.key);
  sessionStorage.setItem(ENTITY, s.entity);
}

export function clearSession(): void {
  sessionStorage.removeItem(KEY);
  sessionStorage.removeItem(ENTITY);
}
