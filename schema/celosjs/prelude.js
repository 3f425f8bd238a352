// The JavaScript half of the Celos API that celos import-js provides: the
// slot-time objects property functions receive, and the guard that turns a
// call of an unknown celos.* function into a clear error. The builders are
// Go functions in __celos (see eval.go).
(function (global) {
	"use strict";
	function pad(n, w) {
		var s = String(n);
		while (s.length < w) { s = "0" + s; }
		return s;
	}
	// CelosTime is a UTC instant with the getters of the Joda DateTime and
	// java.time ZonedDateTime that Celos handed to property functions.
	function CelosTime(ms) { this._d = new Date(ms); }
	var T = CelosTime.prototype;
	T.getYear = function () { return this._d.getUTCFullYear(); };
	T.getMonthOfYear = function () { return this._d.getUTCMonth() + 1; };
	T.getMonthValue = T.getMonthOfYear;
	T.getDayOfMonth = function () { return this._d.getUTCDate(); };
	T.getHourOfDay = function () { return this._d.getUTCHours(); };
	T.getHour = T.getHourOfDay;
	T.getMinuteOfHour = function () { return this._d.getUTCMinutes(); };
	T.getMinute = T.getMinuteOfHour;
	T.getSecondOfMinute = function () { return this._d.getUTCSeconds(); };
	T.getSecond = T.getSecondOfMinute;
	T.getMillisOfSecond = function () { return this._d.getUTCMilliseconds(); };
	T.getMillis = function () { return this._d.getTime(); };
	T.toEpochSecond = function () { return Math.floor(this._d.getTime() / 1000); };
	T.getDayOfWeek = function () { var d = this._d.getUTCDay(); return d === 0 ? 7 : d; };
	function plus(ms) { return function (n) { return new CelosTime(this._d.getTime() + n * ms); }; }
	function minus(ms) { return function (n) { return new CelosTime(this._d.getTime() - n * ms); }; }
	var units = { Seconds: 1000, Minutes: 60000, Hours: 3600000, Days: 86400000, Weeks: 604800000 };
	Object.keys(units).forEach(function (u) {
		T["plus" + u] = plus(units[u]);
		T["minus" + u] = minus(units[u]);
	});
	function addMonths(t, n) {
		var d = new Date(t._d.getTime());
		var day = d.getUTCDate();
		d.setUTCDate(1);
		d.setUTCMonth(d.getUTCMonth() + n);
		var last = new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 0)).getUTCDate();
		d.setUTCDate(Math.min(day, last));
		return new CelosTime(d.getTime());
	}
	T.plusMonths = function (n) { return addMonths(this, n); };
	T.minusMonths = function (n) { return addMonths(this, -n); };
	T.plusYears = function (n) { return addMonths(this, 12 * n); };
	T.minusYears = function (n) { return addMonths(this, -12 * n); };
	// toString() is ISO 8601 with milliseconds; toString(pattern) formats
	// with the Joda pattern letters y M d H m s S and 'quoted text'.
	T.toString = function (pattern) {
		var d = this._d;
		if (pattern === undefined) { return d.toISOString(); }
		var fields = { y: d.getUTCFullYear(), M: d.getUTCMonth() + 1, d: d.getUTCDate(), H: d.getUTCHours(), m: d.getUTCMinutes(), s: d.getUTCSeconds(), S: d.getUTCMilliseconds() };
		var out = "";
		for (var i = 0; i < pattern.length;) {
			var c = pattern.charAt(i);
			if (c === "'") {
				var j = pattern.indexOf("'", i + 1);
				if (j < 0) { j = pattern.length; }
				out += j === i + 1 ? "'" : pattern.substring(i + 1, j);
				i = j + 1;
				continue;
			}
			var n = 1;
			while (pattern.charAt(i + n) === c) { n++; }
			if (fields.hasOwnProperty(c)) {
				var v = fields[c];
				if (c === "y" && n === 2) { out += pad(v % 100, 2); } else { out += pad(v, n); }
			} else if (/[A-Za-z]/.test(c)) {
				throw new Error("pattern letter '" + c + "' in toString(\"" + pattern + "\") is not supported by celos import-js");
			} else {
				out += pattern.substr(i, n);
			}
			i += n;
		}
		return out;
	};
	T.toDate = function () { return new Date(this._d.getTime()); };
	// SlotID is what Celos passed to a property function.
	function SlotID(id, ms) { this._id = id; this._t = new CelosTime(ms); }
	SlotID.prototype.getWorkflowId = function () { var id = this._id; return { toString: function () { return id; }, getId: function () { return id; } }; };
	SlotID.prototype.getScheduledTime = function () { return this._t; };
	SlotID.prototype.getSlotTime = function () { return this._t; };
	SlotID.prototype.toString = function () { return this._id + "@" + this._t.toString(); };
	Object.defineProperty(global, "__celosSlot", { value: function (id, ms) { return new SlotID(id, ms); } });
	Object.defineProperty(global, "__celosTime", { value: function (ms) { return new CelosTime(ms); } });

	var api = global.__celos;
	global.celos = new Proxy(api, {
		get: function (t, k) {
			if (k in t || typeof k === "symbol") { return t[k]; }
			throw new TypeError("celos." + String(k) + " is not a function of Celos's JavaScript API");
		}
	});
	global.importDefaults = api.importDefaults;
})(this);
