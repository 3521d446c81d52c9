// The admin API as the page sees it: JSON over fetch, with the admin key when one is needed.
//
// The key is asked for only after the API answers 401, kept in sessionStorage (this tab,
// gone when it closes), and sent as `Authorization: Bearer`. Without a configured key the
// gateway answers loopback clients directly and no key is ever asked for.

const KEY_ITEM = "rungway.adminKey";

export class AdminError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export class AdminClient {
  constructor(askKey) {
    this.askKey = askKey;
    this.asking = null;
  }

  get hasKey() {
    return sessionStorage.getItem(KEY_ITEM) !== null;
  }

  forgetKey() {
    sessionStorage.removeItem(KEY_ITEM);
  }

  async get(path) {
    for (let attempt = 0; attempt < 3; attempt += 1) {
      const headers = { accept: "application/json" };
      const key = sessionStorage.getItem(KEY_ITEM);
      if (key !== null) headers.authorization = `Bearer ${key}`;
      const response = await fetch(path, { headers, cache: "no-store" });
      if (response.status === 401) {
        await this.promptForKey(key !== null);
        continue;
      }
      const body = await response.json().catch(() => null);
      if (!response.ok) {
        const message = body?.error?.message ?? `${response.status} ${response.statusText}`;
        throw new AdminError(response.status, message);
      }
      return body;
    }
    throw new AdminError(401, "the admin key was refused");
  }

  // One prompt at a time: the polls that meet a 401 together share it.
  promptForKey(wasRefused) {
    if (this.asking === null) {
      if (wasRefused) this.forgetKey();
      this.asking = this.askKey(wasRefused).then((key) => {
        sessionStorage.setItem(KEY_ITEM, key);
        this.asking = null;
      });
    }
    return this.asking;
  }
}
